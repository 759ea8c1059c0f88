// The status and headers of the final response of a transfer (after
// redirects), with the few header fields mediafs acts on parsed once.

public struct ResponseHead: Sendable, Equatable {
    public var status: Int
    /// Header names lower-cased; a repeated header keeps its last value.
    public var headers: [String: String]

    public init(status: Int, headers: [String: String]) {
        self.status = status
        self.headers = headers
    }

    public var contentLength: Int64? { headers["content-length"].flatMap { Int64($0) } }
    public var contentType: String? { headers["content-type"] }
    public var etag: String? { headers["etag"] }
    public var lastModified: String? { headers["last-modified"] }
    public var acceptsRanges: Bool {
        headers["accept-ranges"]?.lowercased().contains("bytes") ?? false
    }

    /// `Content-Range: bytes FIRST-LAST/TOTAL`, as a half-open range and the
    /// total (nil when the total is `*`).
    public var contentRange: (range: Range<Int64>, total: Int64?)? {
        guard var value = headers["content-range"]?.lowercased() else { return nil }
        guard value.hasPrefix("bytes") else { return nil }
        value.removeFirst(5)
        let parts = value.trimmingSpaces.split(separator: "/", maxSplits: 1)
        guard parts.count == 2 else { return nil }
        let bounds = parts[0].split(separator: "-", maxSplits: 1)
        guard bounds.count == 2, let first = Int64(bounds[0]), let last = Int64(bounds[1]),
              first >= 0, last >= first else { return nil }
        let total = Int64(parts[1])
        if parts[1] != "*" && (total == nil || total! <= last) { return nil }
        return (first..<(last + 1), total)
    }

    /// The total length of a `Content-Range: bytes */TOTAL` answer (416).
    public var unsatisfiedRangeTotal: Int64? {
        guard let value = headers["content-range"]?.lowercased(), value.hasPrefix("bytes */") else { return nil }
        return Int64(value.dropFirst(8))
    }

    /// Adds one raw header line ("Name: value\r\n"); a status line starts a
    /// new response, so only the last response of a redirect chain remains.
    public mutating func add(line raw: Substring) {
        let line = raw.trimmingSpaces
        if line.hasPrefix("HTTP/") {
            let fields = line.split(separator: " ", maxSplits: 2)
            status = fields.count > 1 ? Int(fields[1]) ?? 0 : 0
            headers = [:]
        } else if let colon = line.firstIndex(of: ":") {
            let name = line[..<colon].lowercased()
            headers[name] = String(line[line.index(after: colon)...].trimmingSpaces)
        }
    }
}

extension StringProtocol {
    var trimmingSpaces: Substring {
        let s = Substring(self)
        guard let first = s.firstIndex(where: { !$0.isWhitespace }) else { return s[s.endIndex...] }
        let last = s.lastIndex(where: { !$0.isWhitespace })!
        return s[first...last]
    }
}
