// What the catalog keeps of a mounted file while no loader stands for it: a
// stat's and a listing's answer, and what the evictor and the statistics
// count, in a few words and no allocation. It is the entry's metadata as
// saved, so a loader made from the cache when the file is used agrees with it.
#if canImport(Glibc)
import Glibc
#endif

public struct EntryRecord: Sendable, Equatable {
    /// Size and mtime (getattr, readdirplus); nil: not known, and a stat
    /// probes: with a HEAD for a listed entry (RecordProbe), else through
    /// a loader, whose lookup brings the first bytes along.
    public var size: Int64? {
        get { knownSize >= 0 ? knownSize : nil }
        set { knownSize = newValue ?? -1 }
    }
    /// The size, or -1: an optional's tag byte took the record from 48 to
    /// 56 bytes, 2 MiB in the catalog's dictionary at 100,000 entries.
    private var knownSize: Int64
    public var mtime: Int
    /// Bytes the metadata claims.
    public var cachedBytes: Int64
    /// Disk blocks of the data file.
    public var allocatedBytes: Int64
    /// Seconds since the epoch, with their fraction while the mount knew them.
    public var lastAccess: Double
    public var isComplete: Bool
    public var isPinned: Bool
    /// Whether the cache may hold metadata for it. Without, a loader is
    /// made without reading the disk: a listing of 100,000 new entries
    /// makes a loader each, under the catalog's lock.
    public var hasMeta: Bool
    /// A listing named it while its size was unknown: its probe waits in
    /// the ProbeFeeder, and a stat that overtakes it sends a HEAD too,
    /// since a scan of a library stats every file and reads none.
    public var listed = false
    /// Only library scans have read it (ReadClass): evicted first. Kept
    /// by the mount only; an entry read back from disk counts as a player's.
    public var isScanOnly = false

    public var attributes: (size: Int64, mtime: Int)? { size.map { ($0, mtime) } }

    init(size: Int64?, mtime: Int, cachedBytes: Int64, allocatedBytes: Int64, lastAccess: Double,
         isComplete: Bool, isPinned: Bool, hasMeta: Bool) {
        knownSize = size ?? -1
        self.mtime = mtime
        self.cachedBytes = cachedBytes
        self.allocatedBytes = allocatedBytes
        self.lastAccess = lastAccess
        self.isComplete = isComplete
        self.isPinned = isPinned
        self.hasMeta = hasMeta
    }

    /// The record of an entry's metadata as read from the cache (nil: none).
    init(meta: EntryMeta?, store: CacheStore) {
        guard let meta else {
            self.init(size: nil, mtime: 0, cachedBytes: 0, allocatedBytes: 0, lastAccess: 0,
                      isComplete: false, isPinned: false, hasMeta: false)
            return
        }
        let cached = meta.present.byteCount
        self.init(size: meta.info.length, mtime: FileLoader.attributes(of: meta.info).mtime, cachedBytes: cached,
                  allocatedBytes: cached > 0 ? Self.allocatedBytes(forKey: meta.url, in: store) : 0,
                  lastAccess: Double(meta.lastAccess), isComplete: meta.isComplete, isPinned: meta.pinned,
                  hasMeta: true)
    }

    /// Disk blocks of an entry's data file, by path: asking must not open
    /// (and hold) a descriptor.
    static func allocatedBytes(forKey key: String, in store: CacheStore) -> Int64 {
        var st = stat()
        return stat(store.directory(forKey: key) + "/data", &st) == 0 ? Int64(st.st_blocks) * 512 : 0
    }

    /// The evictor removed the entry (into the trash): nothing cached, no
    /// metadata. The size stays known for stats; an open probes again.
    mutating func dropBytes() {
        cachedBytes = 0
        allocatedBytes = 0
        isComplete = false
        hasMeta = false
    }
}
