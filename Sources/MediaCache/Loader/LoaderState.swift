// What a FileLoader knows and does that changes, in parts that own their
// rules: the cached bytes and their freeing (CachedBytes), the transfers
// and the reads waiting on them (TransferBook), the handles and the
// kernel's view of them (HandleBook), and the version (VersionState); and
// beside them what the metadata keeps of the entry's use.
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

    var bytes = CachedBytes()
    var fetches: TransferBook
    var handles = HandleBook()
    var version = VersionState()
    /// Seconds since the epoch, with their fraction: two files read in
    /// the same second must still be evicted oldest first. The metadata
    /// keeps whole seconds.
    var lastAccess = 0.0
    /// Never evicted or trimmed (FileLoader+Pinning.swift); kept in the metadata.
    var pinned = false
    /// No player has read it (ReadClass): its bytes are a library scan's,
    /// evicted first. With read classes on, a new entry is, until a player
    /// reads it; one read back from disk with bytes is not (its class is
    /// not saved).
    var scanOnly = false
    /// The metadata on disk no longer says what this state does.
    var dirty = false
    /// What the head of a cold file says its demuxer reads next.
    var lookahead = ContainerLookahead(cold: true)

    init(clock: Clock) {
        fetches = TransferBook(clock: clock)
    }

    /// Freeing's step 1 for the whole file: every byte unclaimed, the data
    /// file to be emptied (FileLoader+Freeing.swift). Never blocks.
    mutating func markReset() {
        bytes.markReset()
        dirty = true
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
