// What the evictor sees of a mounted file: its use of the cache
// (FileUsage), and a file in use (a loader) to free bytes through. The
// evictor knows no loader or record by type, so the limits sit below the
// loader and the catalog: FileLoader conforms (Loader), and the catalog
// hands over a record's usage (EntryRecord.usage).

/// What the evictor needs to know of a file of the mount.
public struct FileUsage: Sendable, Equatable {
    /// Disk blocks its entry takes (data and metadata).
    public var allocatedBytes: Int64
    /// Bytes of the file cached.
    public var cachedBytes: Int64 = 0
    /// Seconds since the epoch, with their fraction.
    public var lastAccess: Double
    public var isComplete: Bool
    /// Transfers running or reads waiting: not to be evicted now.
    public var isBusy = false
    /// Never to be evicted or trimmed; counts against the limits all the same.
    public var isPinned: Bool
    /// Only library scans have read it: evicted first, in the scan budget.
    public var isScanOnly = false
    /// A handle is open on it: a probe may read it again at any moment.
    public var isOpen = false
}

/// A mounted file whose bytes are freed only through it (FileLoader): the
/// four calls the evictor makes.
public protocol EvictableFile: AnyObject, Sendable {
    func usage() -> FileUsage
    /// Drops every cached byte unless it is pinned or in use; whether it did.
    func evict() -> Bool
    /// Frees cached bytes until at most `target` remain, never those a read
    /// waits on.
    func trim(to target: Int64)
    /// A scan's entry keeps only the ranges its probes read.
    func trimToProbeRanges()
}
