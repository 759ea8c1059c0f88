// What a FileLoader knows and does that changes, in parts that own their
// rules: the cached bytes and their freeing (CachedBytes), the transfers
// and the reads waiting on them (TransferBook), the handles and the
// kernel's view of them (HandleBook), the version (VersionState), what the
// metadata keeps of the entry's use (EntryUse) and what the head of a cold
// file says its demuxer reads next (ContainerLookahead). A change the
// metadata must keep is one of the transitions here, which mark it unsaved.
// Held only by the loader's `lock` (ConditionLocked), so it is touched only
// with that lock held; what needs the loader too (the fetcher, the store)
// takes it `inout` from there. It must not do I/O or wait: the lock is held.
import MediaNetwork
import MediaSources
import MediaStore
import MediaSupport

struct LoaderState {
    struct Transfer {
        var end: Int64
        /// Next byte this transfer will write.
        var position: Int64
        /// The handle whose reads started it; its seek or close may stop it.
        var owner: ObjectIdentifier
        /// Asked to stop: no read should count on it any more.
        var cancelled = false
        /// Stopped by its reader's seek or close, not by a purge or a
        /// change: its bytes are still the file's, so those the network
        /// thread hands over before the stop reaches it are kept (a fast
        /// server has sent them; dropped, a later read asks again).
        var keepsArrivals = false
        var priority: FetchRequest.Priority
        /// Room under the cache limits reserved for its bytes, not yet used.
        var reserved: Int64 = 0
        /// When it was asked for (nil: unknown), then when its head came and
        /// where its body began: the link's round trip and rate.
        var askedAt: Double?
        var head: (at: Double, position: Int64)?
        /// Its body has told the link's rate once already (at
        /// `LinkEstimate.minRateSample` bytes, before its end).
        var rateTold = false
        /// It asked for a range with If-Range: a 200 means another version.
        var ifRange = false
        /// Whose room under the cache limits its bytes take, and whose
        /// count of fetched bytes they add to.
        var readClass = ReadClass.play
        /// A long transfer (to the end of the file, or of its hole) holds
        /// at `limit` until its reader comes nearer; `start` is where its
        /// body begins, so the fetcher's allowance is `limit - start`. nil:
        /// a transfer of one range that runs to its end.
        var limit: Int64?
        var start: Int64 = 0
        /// The account of the reader whose read started it: its bytes count
        /// as that process's fetches (nil: the loader's own, a preload's).
        var account: ReaderAccount?
        /// Of `--background-daily`: bytes counted against the day when it
        /// started and not arrived yet (a background transfer's).
        var committed: Int64 = 0
        /// A player's first read at the file's start waits on it, asked
        /// before the link was known: its answer tells the link, and if
        /// far, that player's stream starts then (decision 0058).
        var streamOnAnswer: (pattern: ReadPattern, read: Range<Int64>)?

        /// Where it will stop for now: its limit, else its end.
        var reach: Int64 { min(end, limit ?? end) }
        /// Held short of its end (or to be): it runs on only as let go.
        var isLong: Bool { (limit ?? end) < end }
        /// Whether a body chunk it hands over is written and claimed.
        var takesBytes: Bool { !cancelled || keepsArrivals }

        /// Not worth a stop: it brought its last byte, its end not yet told
        /// (an FTP server's 226: a stop would tear its connection down), or
        /// a short one has less left than `inFlight`, what the server has
        /// sent already when a stop reaches it (decision 0016). A long one
        /// is never nearly done: it would run on to the file's end.
        func isNearlyDone(inFlight: Int64) -> Bool {
            position >= end || !isLong && end - position < inFlight
        }
    }

    enum ProbeState {
        case idle
        case running(ContentProbe)
        /// A transient failure: the next lookup after `at` probes again.
        case retrying(at: Double)
        case failed(MediaError, at: Double)
    }

    /// A read waiting for bytes. Arriving bytes are copied straight into
    /// its buffer (one copy fewer than a pread from the cache, and the way
    /// reads are still served when the cache cannot be written).
    struct Wait {
        var range: Range<Int64>
        var buffer: UnsafeMutableRawBufferPointer
        var filled = ByteRangeSet()
    }

    var bytes = CachedBytes()
    var fetches: TransferBook
    var handles = HandleBook()
    var version = VersionState()
    /// When it was last read, its pin and read class (EntryUse).
    private(set) var use = EntryUse()
    /// The metadata on disk no longer says what this state does: set only
    /// by the transitions below, each of which changes what it would say,
    /// and cleared by `saved()`. Forget it once and the change is not saved.
    private(set) var dirty = false
    /// What the head of a cold file says its demuxer reads next.
    var lookahead = ContainerLookahead(cold: true)
    /// Bytes that arrived uncached and no read took yet (PassingBytes).
    var passing = PassingBytes()

    init(clock: Clock) {
        fetches = TransferBook(clock: clock)
    }

    // MARK: Transitions the metadata keeps

    /// Its metadata must be saved (again): it was made from metadata not on
    /// disk yet, a save of an older one may have landed after its own, or a
    /// freeing could not be persisted.
    mutating func markUnsaved() { dirty = true }

    /// Its metadata as of now is being saved.
    mutating func saved() { dirty = false }

    /// The claim rule: bytes written into the data file are the entry's
    /// only if that file is still the current one (`dataVersion`: not
    /// replaced while they were written) and no freeing began meanwhile (it
    /// waited for the write and will erase what it wrote). Returns whether
    /// they were claimed.
    mutating func claim(written range: Range<Int64>, intoDataVersion version: Int) -> Bool {
        guard version == handles.dataVersion, bytes.claim(range) else { return false }
        dirty = true
        return true
    }

    /// Freeing's step 1 for the whole file: every byte unclaimed, the data
    /// file to be emptied (FileLoader+Freeing.swift). Never blocks.
    mutating func markReset() {
        bytes.markReset()
        dirty = true
    }

    /// Step 1 of a trim: `doomed` unclaimed and marked for freeing.
    mutating func markTrim(_ doomed: ByteRangeSet) {
        bytes.markTrim(doomed)
        if !doomed.isEmpty { dirty = true }
    }

    /// A probe's answer: a new entry, empty, of the version learned.
    /// `readClasses`: it is a scan's until a player reads it.
    mutating func learned(_ info: ContentInfo, at wall: Double, hasEntry: Bool, readClasses: Bool) {
        bytes.setHasEntry(hasEntry)
        bytes.replacePresent(ByteRangeSet())
        use.accessed(at: wall)
        version.learned(info, validatedAt: Int64(wall))
        use.scanned(readClasses)
        lookahead = ContainerLookahead(cold: true)
        dirty = true
    }

    /// The server said the version known is still the one it serves.
    mutating func validated(at wall: Int64) {
        version.validated(at: wall)
        dirty = true
    }

    /// A version known by its length alone takes the validators of the
    /// server's first answer (ChangeDetection.confirmation).
    mutating func confirmVersion(_ named: ContentInfo) {
        version.confirmed(named)
        dirty = true
    }

    /// The server sends whole bodies, whatever the Range asked.
    mutating func ignoresRanges() {
        version.ignoresRanges()
        dirty = true
    }

    /// Returns whether the pin changed.
    mutating func pin(_ on: Bool) -> Bool {
        guard use.pin(on) else { return false }
        dirty = true
        return true
    }

    /// A player read it, or a user asked for it: no longer a scan's, and
    /// saved so, or a remount would take the player's bytes for a scan's.
    mutating func played() {
        guard use.played() else { return }
        bytes.forgetScanRead()
        dirty = true
    }

    // MARK: Transitions the metadata need not keep at once

    /// Read now; saved with the next change (the metadata keeps whole
    /// seconds, and a read alone is not worth a write).
    mutating func accessed(at wall: Double) { use.accessed(at: wall) }

    /// Its record said only scans read it (a class its metadata may not
    /// hold yet).
    mutating func markScanOnly() { use.scanned(true) }

    /// As the metadata read from disk says.
    mutating func restore(_ meta: EntryMeta, readClasses: Bool) {
        version = VersionState(info: meta.info, lastValidated: meta.lastValidated)
        bytes.replacePresent(meta.present)
        // Kept in the metadata: a remount goes on evicting a scan's bytes
        // first, and a player's never for them.
        use = EntryUse(lastAccess: Double(meta.lastAccess), pinned: meta.pinned,
                       scanOnly: readClasses && (meta.present.isEmpty || meta.scanOnly))
        bytes.setHasEntry(true)
        lookahead = ContainerLookahead(cold: meta.present.isEmpty)
    }

    /// Bytes of a wait that are in its buffer or in the cache.
    func availability(of wait: Int) -> ByteRangeSet {
        var available = fetches.waits[wait]!.filled
        for range in bytes.present.ranges where range.overlaps(fetches.waits[wait]!.range) {
            available.insert(range.clamped(to: fetches.waits[wait]!.range))
        }
        return available
    }

    /// How far past its hold a long transfer is joined (and let go on):
    /// the bytes between are fetched for the joining read alone.
    static let heldJoinDistance: Int64 = 1 << 20

    /// Whether a running transfer will soon write `point`: within
    /// `joinDistance` of it, or any distance from a server without ranges.
    /// A long transfer brings what lies before its hold anyway, and only
    /// `heldJoinDistance` past it: a read further on asks for its own bytes
    /// (and cuts the long one there), rather than have it fetch megabytes
    /// nobody asked for on its way.
    func covers(_ transfer: Transfer, _ point: Int64, joinDistance: Int64) -> Bool {
        guard !transfer.cancelled, transfer.position <= point, point < transfer.end else { return false }
        if version.info?.acceptsRanges == false { return true }
        guard transfer.isLong else { return point - transfer.position <= joinDistance }
        return point - max(transfer.position, transfer.reach) <= min(joinDistance, Self.heldJoinDistance)
    }
}
