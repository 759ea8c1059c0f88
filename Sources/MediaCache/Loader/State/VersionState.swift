// Which version of the remote file a loader holds: its content info and
// validators, the probe that learns them, and the generation that a change
// bumps, so a read that began before fails rather than mix two versions.
// Part of LoaderState: touched only under the loader's lock.
import MediaSources
import MediaStore
import MediaSupport

struct VersionState {
    private(set) var info: ContentInfo?
    private(set) var probe = LoaderState.ProbeState.idle
    private(set) var probeAttempts = 0
    /// A listing named this entry (its probe waits in the ProbeFeeder): a
    /// lookup that overtakes that probe sends a HEAD too, since a scan of
    /// a library stats every file and reads none.
    private(set) var listed = false
    /// A 206 of this version was taken: a 200 answered to a later range
    /// request is a change (or ambiguous), not a server that ignores Range.
    private(set) var sawPartial = false
    /// Bumped when the remote content changes; a read that began before
    /// fails instead of mixing versions.
    private(set) var generation = 0
    /// When the server last confirmed this version (seconds since the epoch).
    private(set) var lastValidated: Int64 = 0
    /// `FileLoader.onChange`, called with the lock held.
    private(set) var changeHandler: (@Sendable (_ generation: Int) -> Bool)?

    mutating func setChangeHandler(_ handler: (@Sendable (_ generation: Int) -> Bool)?) { changeHandler = handler }

    init() {}

    /// The version the cache metadata read from disk says.
    init(info: ContentInfo, lastValidated: Int64) {
        self.info = info
        self.lastValidated = lastValidated
    }

    /// A listing names an entry whose info is unknown; false when known.
    mutating func markListed() -> Bool {
        guard info == nil else { return false }
        listed = true
        return true
    }

    mutating func probeStarted(_ probe: ContentProbe) { self.probe = .running(probe) }

    /// A transient failure: the next lookup after the backoff of this many
    /// failures in a row (`backoff`) probes again.
    mutating func probeWillRetry(from at: Double, backoff: (_ failures: Int) -> Double) {
        probeAttempts += 1
        probe = .retrying(at: at + backoff(probeAttempts))
    }

    mutating func probeFailed(_ error: MediaError, at: Double) {
        probe = .failed(error, at: at)
        probeAttempts = 0
    }

    /// A probe's answer: a new entry of this version, confirmed at `validatedAt`.
    mutating func learned(_ learned: ContentInfo, validatedAt: Int64) {
        info = learned
        sawPartial = false
        lastValidated = validatedAt
        probe = .idle
        probeAttempts = 0
    }

    /// A version known by its length alone took its first answer's
    /// validators (`ChangeDetection.confirmation`): the same version, named.
    mutating func confirmed(_ named: ContentInfo) { info = named }

    /// The remote file changed to `fresh`: a new generation. Returns it.
    mutating func changed(to fresh: ContentInfo, validatedAt: Int64) -> Int {
        generation += 1
        info = fresh
        sawPartial = false
        lastValidated = validatedAt
        return generation
    }

    /// The server confirmed this version at `at`.
    mutating func validated(at: Int64) { lastValidated = at }

    /// A 206 of this version was taken.
    mutating func tookPartial() { sawPartial = true }

    /// The server answers ranges with whole bodies.
    mutating func ignoresRanges() { info?.acceptsRanges = false }
}
