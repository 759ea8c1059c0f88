// What a player needs before the first byte: length, type, validators and
// whether ranges work. Learned once from the server, then kept in the cache
// so a remount answers getattr with no network.
import MediaSupport

public struct ContentInfo: Equatable, Sendable {
    /// Total length in bytes.
    package var length: Int64
    /// The Content-Type header, if the server sent one.
    package var contentType: String?
    /// The ETag header, verbatim (quotes and any W/ prefix kept).
    package var etag: String?
    /// The Last-Modified header, verbatim.
    package var lastModified: String?
    /// Whether the server answers Range requests with 206.
    package var acceptsRanges: Bool

    package init(length: Int64, contentType: String? = nil, etag: String? = nil,
                lastModified: String? = nil, acceptsRanges: Bool = true) {
        self.length = length
        self.contentType = contentType
        self.etag = etag
        self.lastModified = lastModified
        self.acceptsRanges = acceptsRanges
    }
}
