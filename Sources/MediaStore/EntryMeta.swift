// What the cache remembers about one URL besides its bytes. A plain value:
// it must not touch disk itself (CacheStore persists it via MetaFormat).
import MediaSupport

public struct EntryMeta: Equatable, Sendable {
    /// The cache key: the URL as the user gave it, not a redirect target.
    package var url: String
    package var info: ContentInfo
    /// Bytes the data file durably holds; never more.
    package var present: ByteRangeSet
    /// Unix seconds; drives LRU eviction.
    package var lastAccess: Int64
    /// Unix seconds when the server last confirmed the validators.
    package var lastValidated: Int64
    /// Kept whatever the limits say: never evicted or trimmed.
    package var pinned: Bool
    /// Only library scans have read its bytes: evicted first, in the scan
    /// budget, at this mount and the next.
    package var scanOnly: Bool

    package init(url: String, info: ContentInfo, present: ByteRangeSet,
                lastAccess: Int64, lastValidated: Int64, pinned: Bool = false, scanOnly: Bool = false) {
        self.url = url
        self.info = info
        self.present = present
        self.lastAccess = lastAccess
        self.lastValidated = lastValidated
        self.pinned = pinned
        self.scanOnly = scanOnly
    }

    package var isComplete: Bool { present.contains(0..<info.length) }
}
