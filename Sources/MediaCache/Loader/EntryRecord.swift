// What the catalog keeps of a mounted file while no loader stands for it: a
// stat's and a listing's answer, and what the evictor and the statistics
// count, in a few words and no allocation. It is the entry's metadata as
// saved, so a loader made from the cache when the file is used agrees with it.
#if canImport(Glibc)
import Glibc
import MediaNetwork
import MediaStore
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
    public var isComplete: Bool {
        get { flags.contains(.complete) }
        set { flags.set(.complete, newValue) }
    }
    public var isPinned: Bool {
        get { flags.contains(.pinned) }
        set { flags.set(.pinned, newValue) }
    }
    /// Whether the cache may hold metadata for it. Without, a loader is
    /// made without reading the disk: a listing of 100,000 new entries
    /// makes a loader each, under the catalog's lock.
    public var hasMeta: Bool {
        get { flags.contains(.hasMeta) }
        set { flags.set(.hasMeta, newValue) }
    }
    /// A listing named it while its size was unknown: its probe waits in
    /// the ProbeFeeder, and a stat that overtakes it sends a HEAD too,
    /// since a scan of a library stats every file and reads none.
    public var listed: Bool {
        get { flags.contains(.listed) }
        set { flags.set(.listed, newValue) }
    }
    /// Only library scans have read it (ReadClass): evicted first. Kept
    /// by the mount only; an entry read back from disk counts as a player's.
    public var isScanOnly: Bool {
        get { flags.contains(.scanOnly) }
        set { flags.set(.scanOnly, newValue) }
    }
    /// The five flags above in one byte, so that the ETag's fingerprint
    /// still fits in the 48 bytes (five Bools and a UInt32 made 56).
    private var flags: Flags = []
    /// A fingerprint of the ETag its metadata holds (0: none), so a
    /// refreshed listing that shows another ETag for a file nobody uses
    /// notices the change without reading the metadata (see
    /// `mayDiffer`); 4 bytes in what was the record's padding.
    public private(set) var etagPrint: UInt32 = 0

    /// What the evictor sees of the file (CacheEvictor): a record is
    /// never busy or open (a loader stands for a file in use).
    public var usage: FileUsage {
        FileUsage(allocatedBytes: allocatedBytes, cachedBytes: cachedBytes, lastAccess: lastAccess,
                  isComplete: isComplete, isPinned: isPinned, isScanOnly: isScanOnly)
    }

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

    private struct Flags: OptionSet, Sendable, Equatable {
        let rawValue: UInt8
        static let complete = Flags(rawValue: 1)
        static let pinned = Flags(rawValue: 2)
        static let hasMeta = Flags(rawValue: 4)
        static let listed = Flags(rawValue: 8)
        static let scanOnly = Flags(rawValue: 16)

        mutating func set(_ flag: Flags, _ on: Bool) {
            if on { insert(flag) } else { remove(flag) }
        }
    }

    /// Size, date and ETag fingerprint from `info`.
    mutating func take(_ info: ContentInfo) {
        let attributes = FileLoader.attributes(of: info)
        size = attributes.size
        mtime = attributes.mtime
        etagPrint = Self.print(of: info.etag)
    }

    /// Whether a listing's `listed` may name another version than the one
    /// this record stands for, by the rule of `ChangeDetection.listed`
    /// over what a record keeps: another size; another ETag where both
    /// have one; else another date where both have one. A fingerprint that
    /// collides (one in 4 billion) misses an ETag-only change here; the
    /// next open's validators still catch it.
    func mayDiffer(from listed: ContentInfo) -> Bool {
        guard let size else { return false }
        if listed.length != size { return true }
        let print = Self.print(of: listed.etag)
        if print != 0 && etagPrint != 0 { return print != etagPrint }
        guard mtime != 0, let date = listed.lastModified.flatMap(HTTPDate.seconds) else { return false }
        return date != mtime
    }

    /// FNV-1a of an ETag without its weak prefix (a listing may carry the
    /// strong form of what a GET answered weakly); 0 for none.
    static func print(of etag: String?) -> UInt32 {
        guard let etag = etag.map(ChangeDetection.strongETag) else { return 0 }
        var hash: UInt32 = 2_166_136_261
        for byte in etag.utf8 { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        return hash == 0 ? 1 : hash
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
        etagPrint = Self.print(of: meta.info.etag)
        isScanOnly = meta.scanOnly
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
