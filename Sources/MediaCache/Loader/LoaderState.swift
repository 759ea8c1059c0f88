// What a FileLoader knows and does that changes: content info, present
// ranges, transfers, waiting reads, freeing under way, the kernel's readers.
// Held only by the loader's `lock` (ConditionLocked), so it is touched only
// with that lock held; what needs the loader too (the fetcher, the store)
// takes it `inout` from there. It must not do I/O or wait: the lock is held.

struct LoaderState {
    struct Transfer {
        var end: Int64
        /// Next byte this transfer will write.
        var position: Int64
        /// The handle whose reads started it; its seek or close may stop it.
        var owner: ObjectIdentifier
        /// Asked to stop: no read should count on it any more.
        var cancelled = false
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

        /// Where it will stop for now: its limit, else its end.
        var reach: Int64 { min(end, limit ?? end) }
        /// Held short of its end (or to be): it runs on only as let go.
        var isLong: Bool { (limit ?? end) < end }
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

    /// The loader's clock: when `lastError` was set.
    let clock: Clock
    var info: ContentInfo?
    var probe = ProbeState.idle
    var probeAttempts = 0
    /// A listing named this entry (its probe waits in the ProbeFeeder): a
    /// lookup that overtakes that probe sends a HEAD too, since a scan of
    /// a library stats every file and reads none.
    var listed = false
    /// Whether the file has a cache entry (its data file is opened on
    /// demand, through `openFiles`).
    var hasEntry = false
    /// When opening the data file last failed and was said, so a mount out
    /// of descriptors logs once a while, not once a read.
    var openFailureSaidAt = 0.0
    var present = ByteRangeSet()
    var transfers: [TransferID: Transfer] = [:]
    /// Reads waiting for bytes, by wait number.
    var waits: [Int: Wait] = [:]
    var nextWait = 0
    /// Seconds since the epoch, with their fraction: two files read in
    /// the same second must still be evicted oldest first. The metadata
    /// keeps whole seconds.
    var lastAccess = 0.0
    var lastValidated: Int64 = 0
    /// Closed players' handles within `--handle-grace`, with when it ends:
    /// their transfers run on for a handle that reads on where one stopped.
    var lingering: [ObjectIdentifier: (pattern: ReadPattern, until: Double)] = [:]
    /// Players' handles whose first read found no closed handle to go on
    /// from: one still open may close after them (releases come late), and
    /// then hands them its streak and transfers. Removed at their release.
    var fresh: [ObjectIdentifier: ReadPattern] = [:]
    /// Never evicted or trimmed (FileLoader+Pinning.swift); kept in the metadata.
    var pinned = false
    /// No player has read it (ReadClass): its bytes are a library scan's,
    /// evicted first. With read classes on, a new entry is, until a player
    /// reads it; one read back from disk with bytes is not (its class is
    /// not saved).
    var scanOnly = false
    var dirty = false
    var lastError: MediaError? {
        didSet { lastErrorAt = clock.monotonic() }
    }
    var lastErrorAt = 0.0
    /// When the next transfer may start: a failing server is retried with
    /// backoff, or when its Retry-After says.
    var retryAt = 0.0
    var failuresInARow = 0
    /// Whether a failure of this file was logged since its last transfer
    /// that got every byte it asked for: a server down is one log line per
    /// file, not one per read and retry (the rest go to debug).
    var outageLogged = false
    /// After a read gave up, reads fail at once until then, so the kernel's
    /// own retries of a failed read do not each wait through the backoff.
    var unavailableUntil = 0.0
    /// Reads between "bytes present" and the end of their pread, by token:
    /// freeing waits for those that overlap its bytes.
    var reading: [Int: Range<Int64>] = [:]
    /// Body chunks being written into the data file, by transfer: freeing
    /// waits for those that overlap its bytes.
    var writing: [TransferID: Range<Int64>] = [:]
    /// Resets (purge, eviction, change) asked for and carried out: while
    /// more are asked than done, no byte is written into the cache or claimed.
    var resetsAsked = 0
    var resetsDone = 0
    /// Ranges being punched out by a trim: unclaimed, not yet freed.
    var trimming = ByteRangeSet()
    /// Bumped each time the cache stops every transfer (purge, change), so
    /// a read does not count those as the server's failures.
    var stops = 0
    /// Bumped when the remote content changes; a read that began before
    /// fails instead of mixing versions.
    var generation = 0
    /// Where the last read started, so trimming drops played bytes first.
    var lastReadOffset: Int64 = 0
    /// Backing files registered on the data file for the kernel to read
    /// itself (FUSE passthrough): while any, its bytes never change in place.
    var kernelReaders = 0
    /// Bumped when a new data file replaces one the kernel still reads.
    var dataVersion = 0
    /// The generation whose pages alone the kernel may hold: every name of
    /// the file was invalidated after the change to it. Until it catches up
    /// with `generation`, opens go without keep_cache.
    var kernelClean = 0
    /// Open handles that read through the kernel's page cache, by the
    /// generation they opened: while one of an older generation is open, a
    /// new handle bypasses the page cache (direct I/O), so the old handle
    /// never finds pages of the new version there, nor the new one old pages.
    var pageCacheHandles: [Int: Int] = [:]
    /// `FileLoader.onChange`, called with the lock held.
    var changeHandler: (@Sendable (_ generation: Int) -> Bool)?
    /// A 206 of this version was taken: a 200 answered to a later range
    /// request is a change (or ambiguous), not a server that ignores Range.
    var sawPartial = false
    /// What the head of a cold file says its demuxer reads next.
    var lookahead = ContainerLookahead(cold: true)
    /// What scans read of a scan-only file in this mount's life, with the
    /// index ranges the lookahead fetched for them: all such a file keeps
    /// when the scan budget trims it (`trimToProbeRanges`), so it keeps
    /// what its probe read, not the lookup's whole first 512 KiB beside
    /// ffprobe's 262 KB. Empty once a player reads, or after a remount
    /// (then the probe spans at either end are kept).
    var scanRead = ByteRangeSet()
    /// Handles open on the file (FUSE opens, until their release): the
    /// lookahead fetches only for a file that is being read.
    var openHandles = 0

    init(clock: Clock) {
        self.clock = clock
    }

    var kernelReading: Bool { kernelReaders > 0 }

    /// Whether a freeing is marked and not yet done.
    var isFreeingAnything: Bool { resetsAsked > resetsDone || !trimming.isEmpty }

    /// Whether bytes of `range` may be neither written nor claimed now.
    func isFreeing(_ range: Range<Int64>) -> Bool {
        resetsAsked > resetsDone || trimming.overlaps(range)
    }

    /// Freeing's step 1 for the whole file: every byte unclaimed, the data
    /// file to be emptied (FileLoader+Freeing.swift). Never blocks.
    mutating func markReset() {
        present = ByteRangeSet()
        scanRead = ByteRangeSet()
        resetsAsked += 1
        dirty = true
    }

    /// Bytes of a wait that are in its buffer or in the cache.
    func availability(of wait: Int) -> ByteRangeSet {
        var available = waits[wait]!.filled
        for range in present.ranges where range.overlaps(waits[wait]!.range) {
            available.insert(range.clamped(to: waits[wait]!.range))
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
        if info?.acceptsRanges == false { return true }
        guard transfer.isLong else { return point - transfer.position <= joinDistance }
        return point - max(transfer.position, transfer.reach) <= min(joinDistance, Self.heldJoinDistance)
    }

    /// Long transfers that gave their connection up (`FetchError.yielded`),
    /// by owner: the owner's next cached read reads ahead again at once,
    /// as it would have let the transfer go on.
    var yielded: Set<ObjectIdentifier> = []

    /// Whether a read waits on bytes of `range`.
    func isWaitedOn(_ range: Range<Int64>) -> Bool {
        waits.values.contains(where: { $0.range.overlaps(range) })
    }
}
