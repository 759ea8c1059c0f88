// The bytes of a file the cache holds, and their freeing: which ranges are
// present (claimed), the preads and pwrites using them now, and the resets
// and trims under way. Its rule is invariant 1: a byte is claimed only
// while no freeing covers it, so a freeing never races a claim that would
// make the metadata on disk promise bytes being punched out. Part of
// LoaderState: touched only under the loader's lock.
import MediaNetwork
import MediaSupport

struct CachedBytes {
    /// The bytes in the data file (and, once saved, in its metadata).
    private(set) var present = ByteRangeSet()
    /// Whether the file has a cache entry (its data file is opened on
    /// demand, through `openFiles`).
    private(set) var hasEntry = false
    /// When opening the data file last failed and was said, so a mount out
    /// of descriptors logs once a while, not once a read.
    private(set) var openFailureSaidAt = 0.0
    /// Reads between "bytes present" and the end of their pread, by token:
    /// freeing waits for those that overlap its bytes.
    private(set) var reading: [Int: Range<Int64>] = [:]
    /// Body chunks being written into the data file, by transfer: freeing
    /// waits for those that overlap its bytes.
    private(set) var writing: [TransferID: Range<Int64>] = [:]
    /// Resets (purge, eviction, change) asked for and carried out: while
    /// more are asked than done, no byte is written into the cache or claimed.
    private(set) var resetsAsked = 0
    private(set) var resetsDone = 0
    /// Ranges being punched out by a trim: unclaimed, not yet freed.
    private(set) var trimming = ByteRangeSet()
    /// What scans read of a scan-only file in this mount's life, with the
    /// index ranges the lookahead fetched for them: all such a file keeps
    /// when the scan budget trims it (`trimToProbeRanges`), so it keeps
    /// what its probe read, not the lookup's whole first 512 KiB beside
    /// ffprobe's 262 KB. Empty once a player reads, or after a remount
    /// (then the probe spans at either end are kept).
    private(set) var scanRead = ByteRangeSet()
    /// Where the last read started, so trimming drops played bytes first.
    private(set) var lastReadOffset: Int64 = 0

    init(present: ByteRangeSet = ByteRangeSet(), hasEntry: Bool = false) {
        self.present = present
        self.hasEntry = hasEntry
    }

    /// Whether a freeing is marked and not yet done.
    var isFreeingAnything: Bool { resetsAsked > resetsDone || !trimming.isEmpty }

    /// Whether bytes of `range` may be neither written nor claimed now.
    func isFreeing(_ range: Range<Int64>) -> Bool {
        resetsAsked > resetsDone || trimming.overlaps(range)
    }

    /// Claims `range` as present (its bytes are in the data file), unless a
    /// freeing covers it: invariant 1. Returns whether it was claimed.
    @discardableResult
    mutating func claim(_ range: Range<Int64>) -> Bool {
        guard !isFreeing(range) else { return false }
        present.insert(range)
        return true
    }

    /// Freeing's step 1 for the whole file: every byte unclaimed, the data
    /// file to be emptied. Never blocks.
    mutating func markReset() {
        present = ByteRangeSet()
        scanRead = ByteRangeSet()
        resetsAsked += 1
    }

    /// The resets asked up to `target` are carried out.
    mutating func resetsDone(upTo target: Int) {
        resetsDone = max(resetsDone, target)
    }

    /// Freeing's step 1 for some bytes: unclaimed and marked as being
    /// punched out, so no write lands there until `trimDone`.
    mutating func markTrim(_ ranges: ByteRangeSet) {
        for range in ranges.ranges {
            present.remove(range)
            trimming.insert(range)
        }
    }

    /// The bytes of a trim are punched out.
    mutating func trimDone(_ ranges: ByteRangeSet) {
        for range in ranges.ranges { trimming.remove(range) }
    }

    /// Replaces what is claimed, as the metadata read from disk says.
    mutating func replacePresent(_ ranges: ByteRangeSet) {
        present = ranges
    }

    mutating func beginReading(_ range: Range<Int64>, token: Int) { reading[token] = range }
    mutating func endReading(token: Int) { reading[token] = nil }
    mutating func beginWriting(_ range: Range<Int64>, by id: TransferID) { writing[id] = range }
    mutating func endWriting(by id: TransferID) { writing[id] = nil }

    /// Whether a pread or pwrite under way uses a range `inUse` names.
    func isInUse(_ inUse: (Range<Int64>) -> Bool) -> Bool {
        reading.values.contains(where: inUse) || writing.values.contains(where: inUse)
    }

    /// Whether any pread or pwrite is under way.
    var isBusy: Bool { !reading.isEmpty || !writing.isEmpty }

    /// The entry's data file is (or is no longer) there to open.
    mutating func setHasEntry(_ has: Bool) { hasEntry = has }

    /// Whether a failure to open the data file at `now` is to be said: one
    /// said within `quiet` before is not (and then this one counts as said).
    mutating func sayOpenFailure(now: Double, quiet: Double) -> Bool {
        guard now - openFailureSaidAt > quiet else { return false }
        openFailureSaidAt = now
        return true
    }

    /// A read began at `offset`: trimming drops what lies before it first.
    mutating func noteRead(at offset: Int64) { lastReadOffset = offset }

    /// A scan read `range` (or the lookahead fetched it for a scan).
    mutating func noteScanRead(_ range: Range<Int64>) { scanRead.insert(range) }

    /// A player read the file: no range is a scan's alone any more.
    mutating func forgetScanRead() { scanRead = ByteRangeSet() }
}
