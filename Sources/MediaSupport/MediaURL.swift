// A URL as libcurl parses it (its URL API, `curl_url`/`CURLU`), the parser
// that connects: scheme, credentials, host, port, path, query and fragment,
// read once into Swift strings, and the URL as libcurl renders it again.
// Credentials and per-host settings are decided on the same parts libcurl
// will connect to, so a URL two parsers would split differently cannot send
// a secret to the wrong host. Relative references resolve as libcurl resolves
// a redirect's Location. Schemes libcurl does not speak (dav, davs, s3) parse
// too; a string without a scheme does not (no guessing).
import CCurl
import Foundation

package struct MediaURL: Hashable, Sendable, CustomStringConvertible {
    /// The whole URL as libcurl renders it (the form it will be given; the
    /// host as written).
    package let text: String
    /// Lower-cased.
    package let scheme: String
    /// As written (percent-encoded); nil when the URL has none.
    package let user: String?
    package let password: String?
    /// Lower-cased; an IPv6 address keeps its brackets.
    package let host: String
    /// The port written in the URL; nil when none was.
    package let port: Int?
    /// Percent-encoded as written; "/" at least.
    package let path: String
    package let query: String?
    package let fragment: String?

    /// nil when libcurl refuses `text` as a URL (no scheme, no host, a bad
    /// port, a space or a control character), or it is longer than
    /// `maxBytes`.
    package init?(_ text: String) {
        guard text.utf8.count <= Self.maxBytes, let handle = curl_url() else { return nil }
        defer { curl_url_cleanup(handle) }
        guard curl_url_set(handle, CURLUPART_URL, text, Self.parseFlags) == CURLUE_OK else { return nil }
        self.init(handle: handle)
    }

    /// A URL longer than this is refused (libcurl's own limit is 8 MB).
    package static let maxBytes = 64 << 10

    private static let parseFlags = UInt32(CURLU_NON_SUPPORT_SCHEME)

    private init?(handle: OpaquePointer) {
        func part(_ what: CURLUPart) -> String? {
            var value: UnsafeMutablePointer<CChar>?
            guard curl_url_get(handle, what, &value, 0) == CURLUE_OK, let value else { return nil }
            defer { curl_free(value) }
            return String(cString: value)
        }
        guard let text = part(CURLUPART_URL), let scheme = part(CURLUPART_SCHEME),
              let host = part(CURLUPART_HOST), !host.isEmpty else { return nil }
        var port: Int?
        if let written = part(CURLUPART_PORT) {
            guard let value = Int(written), (1...65535).contains(value) else { return nil }
            port = value
        }
        self.text = text
        self.scheme = scheme.lowercased()
        self.user = part(CURLUPART_USER)
        self.password = part(CURLUPART_PASSWORD)
        self.host = host.lowercased()
        self.port = port
        self.path = part(CURLUPART_PATH) ?? "/"
        self.query = part(CURLUPART_QUERY)
        self.fragment = part(CURLUPART_FRAGMENT)
    }

    /// `reference` (absolute, or relative to this URL) resolved as libcurl
    /// resolves a Location; nil when it cannot be. A document's reference
    /// (a playlist's line, an index's href) may hold what no URL may (a
    /// space, a non-ASCII name): those bytes are percent-encoded first, as
    /// a browser does.
    package func resolving(_ reference: String) -> MediaURL? {
        guard Self.escapesAreValid(reference) else { return nil }
        let reference = Self.encodingInvalid(reference)
        guard reference.utf8.count <= Self.maxBytes else { return nil }
        return edited { curl_url_set($0, CURLUPART_URL, reference, Self.parseFlags) }
    }

    /// This URL with `edit` applied to a CURLU handle holding it; nil when
    /// libcurl refuses the edit or the result.
    private func edited(_ edit: (OpaquePointer) -> CURLUcode) -> MediaURL? {
        guard let handle = curl_url() else { return nil }
        defer { curl_url_cleanup(handle) }
        guard curl_url_set(handle, CURLUPART_URL, text, Self.parseFlags) == CURLUE_OK,
              edit(handle) == CURLUE_OK else { return nil }
        return MediaURL(handle: handle)
    }

    /// Whether every `%` in `text` starts an escape (two hex digits follow):
    /// a reference with a broken one means something no parser agrees on.
    static func escapesAreValid(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        var index = 0
        while let percent = bytes[index...].firstIndex(of: UInt8(ascii: "%")) {
            guard percent + 2 < bytes.count, bytes[percent + 1].isHexDigit, bytes[percent + 2].isHexDigit else { return false }
            index = percent + 3
        }
        return true
    }

    /// `text` with every byte no URL may hold percent-encoded: controls,
    /// space, `"<>\^`{|}`, bytes past ASCII, and `[` `]` past the
    /// authority (where they only ever bracket an IPv6 address). A `%`
    /// stays (an escape).
    static func encodingInvalid(_ text: String) -> String {
        let invalid: Set<UInt8> = Set(" \"<>\\^`{|}".utf8)
        let utf8 = text.utf8
        // Where the authority of an absolute or network-path reference ends.
        let authorityEnd: String.Index
        if let authority = writtenAuthority(in: text) {
            authorityEnd = authority.upperBound
        } else if utf8.starts(with: "//".utf8) {
            let start = utf8.index(utf8.startIndex, offsetBy: 2)
            authorityEnd = utf8[start...].firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }
                ?? utf8.endIndex
        } else {
            authorityEnd = utf8.startIndex
        }
        func needs(_ byte: UInt8, at index: String.Index) -> Bool {
            byte < 0x21 || byte >= 0x7F || invalid.contains(byte)
                || (index >= authorityEnd && (byte == UInt8(ascii: "[") || byte == UInt8(ascii: "]")))
        }
        guard utf8.indices.contains(where: { needs(utf8[$0], at: $0) }) else { return text }
        let hex = Array("0123456789ABCDEF".unicodeScalars)
        var encoded = ""
        encoded.reserveCapacity(utf8.count * 3)
        for index in utf8.indices {
            let byte = utf8[index]
            if needs(byte, at: index) {
                encoded.unicodeScalars.append("%")
                encoded.unicodeScalars.append(hex[Int(byte >> 4)])
                encoded.unicodeScalars.append(hex[Int(byte & 0xF)])
            } else {
                encoded.unicodeScalars.append(Unicode.Scalar(byte))
            }
        }
        return encoded
    }

    /// Whether `text` starts with a scheme (RFC 3986: a letter, then
    /// letters, digits, `+`, `-` or `.`) and `://`: written as a URL,
    /// whether or not it is a valid one (a path or a bare name is not).
    package static func hasScheme(_ text: String) -> Bool {
        writtenAuthority(in: text) != nil
    }

    /// Where the authority (user information, host and port) is written in
    /// `text`: from after `scheme://` to the first `/`, `?` or `#`; nil when
    /// `text` does not start with a scheme and `://`. For what only the
    /// text can say (what a user wrote; redacting text that may not parse),
    /// never for where to connect: that is the parsed `host`.
    package static func writtenAuthority(in text: String) -> Range<String.Index>? {
        let utf8 = text.utf8
        var index = utf8.startIndex
        while index != utf8.endIndex {
            let byte = utf8[index]
            let letter = (byte | 0x20) >= UInt8(ascii: "a") && (byte | 0x20) <= UInt8(ascii: "z")
            let other = (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "+")
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
            guard letter || (index != utf8.startIndex && other) else { break }
            index = utf8.index(after: index)
        }
        guard index != utf8.startIndex, utf8[index...].starts(with: "://".utf8) else { return nil }
        let start = utf8.index(index, offsetBy: 3)
        let end = utf8[start...].firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }
        return start..<(end ?? utf8.endIndex)
    }

    /// The scheme as written, lower-cased; nil without `scheme://`.
    package static func writtenScheme(of text: String) -> String? {
        guard let authority = writtenAuthority(in: text) else { return nil }
        return text[..<text.utf8.index(authority.lowerBound, offsetBy: -3)].lowercased()
    }

    /// The path with its escapes decoded (as written when one is invalid).
    package var decodedPath: String {
        path.removingPercentEncoding ?? path
    }

    /// This URL with `user` and `password` (percent-encoded, as read from
    /// another URL) as its credentials, or none; nil if libcurl refuses them.
    package func withCredentials(user: String?, password: String?) -> MediaURL? {
        edited { handle in
            let set = curl_url_set(handle, CURLUPART_USER, user, 0)
            return set == CURLUE_OK ? curl_url_set(handle, CURLUPART_PASSWORD, password, 0) : set
        }
    }

    /// This URL with no fragment.
    package var withoutFragment: MediaURL {
        guard fragment != nil else { return self }
        return edited { curl_url_set($0, CURLUPART_FRAGMENT, nil, 0) } ?? self
    }

    /// This URL with no credentials.
    package var withoutCredentials: MediaURL {
        guard user != nil || password != nil else { return self }
        return withCredentials(user: nil, password: nil) ?? self
    }

    /// The port it connects to: the one written, or the default of http,
    /// https, sftp, ftp or ftps (nil for another scheme without one).
    package var effectivePort: Int? {
        port ?? Self.defaultPort(scheme)
    }

    package static func defaultPort(_ scheme: String) -> Int? {
        switch scheme {
        case "http", "dav": return 80
        case "https", "davs": return 443
        case "sftp": return 22
        case "ftp": return 21
        case "ftps": return 990
        default: return nil
        }
    }

    package var isHTTP: Bool { scheme == "http" || scheme == "https" }

    /// The last segment of the path, still percent-encoded ("" for "/").
    /// (Decoded: `decodedPath`'s last.)
    package var lastPathSegment: Substring {
        path.split(separator: "/").last ?? ""
    }

    /// Whether `text` is a URL (it has a scheme and a host, as libcurl reads
    /// it), not a path or a bare name.
    package static func isURL(_ text: String) -> Bool {
        MediaURL(text) != nil
    }

    package var description: String { text }
}

private extension UInt8 {
    var isHexDigit: Bool {
        (self >= UInt8(ascii: "0") && self <= UInt8(ascii: "9")) || ((self | 0x20) >= UInt8(ascii: "a") && (self | 0x20) <= UInt8(ascii: "f"))
    }
}
