// The status and headers of the final response of a transfer (after
// redirects), with the few header fields mediafs acts on parsed once. Every
// number is bounded by Limits: a value past them parses as absent.
import Foundation
import MediaSupport

public struct ResponseHead: Sendable, Equatable {
    package var status: Int
    /// Header names lower-cased; a repeated header keeps its last value.
    package var headers: [String: String]
    /// What the time from its request to this head says of the link.
    package var roundTrip = RoundTrip.arrival

    /// `.arrival`: that time is a round trip (an HTTP head's). SFTP
    /// (SFTPFetcher) answers a read on a file it keeps open at once, its
    /// bytes perhaps asked for already: `.unknown`; one that opened the
    /// file now timed the open, one round trip: `.measured`.
    package enum RoundTrip: Sendable, Equatable {
        case arrival
        case measured(Double)
        case unknown
    }

    package init(status: Int, headers: [String: String]) {
        self.status = status
        self.headers = headers
    }

    /// What a reader gets for this answer when it was not the bytes asked
    /// for: 404 and 410 are ENOENT, 401 and 403 EACCES, the rest EIO (a 2xx
    /// here had no usable length, and the server's words say why).
    package var failure: MediaError {
        switch status {
        case 404, 410: return MediaError(ENOENT, "HTTP \(status)")
        case 401, 403: return MediaError(EACCES, "HTTP \(status)")
        case 200..<300:
            // The server's own words, shortened, so the log line shows which header was unusable.
            let said = ["content-length", "content-range"].compactMap { name in
                headers[name].map { "\(name) '\($0.prefix(80))'" }
            }
            return MediaError.io("HTTP \(status) without a usable length"
                                 + (said.isEmpty ? "" : " (\(said.joined(separator: ", ")))"))
        default: return MediaError.io("HTTP \(status)")
        }
    }

    package var contentLength: Int64? { headers["content-length"].flatMap(Limits.length) }
    package var contentType: String? { headers["content-type"] }
    package var etag: String? { headers["etag"] }
    package var lastModified: String? { headers["last-modified"] }
    package var acceptsRanges: Bool {
        headers["accept-ranges"]?.lowercased().contains("bytes") ?? false
    }

    /// `Content-Range: bytes FIRST-LAST/TOTAL`, as a half-open range and the
    /// total (nil when the total is `*`). The range ends within
    /// `Limits.maxLength` and before the total.
    package var contentRange: (range: Range<Int64>, total: Int64?)? {
        guard var value = headers["content-range"]?.lowercased() else { return nil }
        guard value.hasPrefix("bytes") else { return nil }
        value.removeFirst(5)
        let parts = value.trimmingSpaces.split(separator: "/", maxSplits: 1)
        guard parts.count == 2 else { return nil }
        let bounds = parts[0].split(separator: "-", maxSplits: 1)
        guard bounds.count == 2, let first = Limits.length(bounds[0]), let last = Limits.length(bounds[1]),
              first <= last, last < Limits.maxLength else { return nil }
        if parts[1] == "*" { return (first..<(last + 1), nil) }
        guard let total = Limits.length(parts[1]), total > last else { return nil }
        return (first..<(last + 1), total)
    }

    /// The total length of a `Content-Range: bytes */TOTAL` answer (416).
    package var unsatisfiedRangeTotal: Int64? {
        guard let value = headers["content-range"]?.lowercased(), value.hasPrefix("bytes */") else { return nil }
        return Limits.length(value.dropFirst(8))
    }

    /// `Retry-After` as seconds to wait from now, within
    /// 0...`Limits.maxRetryAfter`: delta-seconds or an HTTP date. Nil when
    /// absent or unreadable (a sign, a fraction, "nan" are not delta-seconds).
    /// `now`: the wall clock's seconds since the epoch, which a date is from.
    package func retryAfterSeconds(now: Double) -> Double? {
        guard let value = headers["retry-after"], !value.isEmpty else { return nil }
        if value.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
            // Digits past Double's range still mean "a long time".
            return min(Double(value) ?? Limits.maxRetryAfter, Limits.maxRetryAfter)
        }
        guard let date = HTTPDate.seconds(value) else { return nil }
        return min(max(Double(date) - now, 0), Limits.maxRetryAfter)
    }

    /// Adds one raw header line ("Name: value\r\n"); a status line starts a
    /// new response, so only the last response of a redirect chain remains.
    /// Bytes, not Characters: this runs for every header line of every
    /// response on the network thread, and grapheme-by-grapheme trimming
    /// was most of that thread's time while a listing was probed.
    package mutating func add(line raw: Substring) {
        let line = raw.trimmingHTTPSpace
        if line.utf8.starts(with: "HTTP/".utf8) {
            let fields = line.split(separator: " ", maxSplits: 2)
            // Three digits or 0, which no branch of the loader accepts.
            status = fields.count > 1 && fields[1].utf8.count == 3 ? Int(fields[1]).flatMap { $0 >= 100 ? $0 : nil } ?? 0 : 0
            headers = [:]
        } else if let colon = line.utf8.firstIndex(of: UInt8(ascii: ":")) {
            let name = line[..<colon].lowercased()
            headers[name] = String(line[line.utf8.index(after: colon)...].trimmingHTTPSpace)
        }
    }
}

extension Substring {
    /// Without the spaces and tabs HTTP allows around a header and its
    /// value, nor the line end. ASCII only, as HTTP's whitespace is; the
    /// ends found are ASCII bytes, so they fall on Character boundaries.
    package var trimmingHTTPSpace: Substring {
        let bytes = utf8
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A }
        var start = bytes.startIndex
        var end = bytes.endIndex
        while start < end, isSpace(bytes[start]) { bytes.formIndex(after: &start) }
        while start < end {
            let last = bytes.index(before: end)
            guard isSpace(bytes[last]) else { break }
            end = last
        }
        return self[start..<end]
    }
}
