// A URL as libcurl parses it (its URL API, `curl_url`/`CURLU`), the parser
// that connects: scheme, credentials, host, port, path, query and fragment,
// read once into Swift strings, and the URL as libcurl renders it again.
// Credentials and per-host settings are decided on the same parts libcurl
// will connect to, so a URL two parsers would split differently cannot send
// a secret to the wrong host. Relative references resolve as libcurl resolves
// a redirect's Location. Schemes libcurl does not speak (dav, davs, s3) parse
// too; a string without a scheme does not (no guessing).
import CCurl

public struct MediaURL: Hashable, Sendable, CustomStringConvertible {
    /// The whole URL as libcurl renders it (the form it will be given; the
    /// host as written).
    public let text: String
    /// Lower-cased.
    public let scheme: String
    /// As written (percent-encoded); nil when the URL has none.
    public let user: String?
    public let password: String?
    /// Lower-cased; an IPv6 address keeps its brackets.
    public let host: String
    /// The port written in the URL; nil when none was.
    public let port: Int?
    /// Percent-encoded as written; "/" at least.
    public let path: String
    public let query: String?
    public let fragment: String?

    /// nil when libcurl refuses `text` as a URL (no scheme, no host, a bad
    /// port, a space or a control character), or it is longer than
    /// `maxBytes`.
    public init?(_ text: String) {
        guard text.utf8.count <= Self.maxBytes, let handle = curl_url() else { return nil }
        defer { curl_url_cleanup(handle) }
        guard curl_url_set(handle, CURLUPART_URL, text, Self.parseFlags) == CURLUE_OK else { return nil }
        self.init(handle: handle)
    }

    /// A URL longer than this is refused (libcurl's own limit is 8 MB).
    public static let maxBytes = 64 << 10

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
    /// resolves a Location; nil when it cannot be.
    public func resolving(_ reference: String) -> MediaURL? {
        guard reference.utf8.count <= Self.maxBytes, let handle = curl_url() else { return nil }
        defer { curl_url_cleanup(handle) }
        guard curl_url_set(handle, CURLUPART_URL, text, Self.parseFlags) == CURLUE_OK,
              curl_url_set(handle, CURLUPART_URL, reference, Self.parseFlags) == CURLUE_OK else { return nil }
        return MediaURL(handle: handle)
    }

    /// This URL with `user` and `password` (percent-encoded, as read from
    /// another URL) as its credentials, or none; nil if libcurl refuses them.
    public func withCredentials(user: String?, password: String?) -> MediaURL? {
        guard let handle = curl_url() else { return nil }
        defer { curl_url_cleanup(handle) }
        guard curl_url_set(handle, CURLUPART_URL, text, Self.parseFlags) == CURLUE_OK,
              curl_url_set(handle, CURLUPART_USER, user, 0) == CURLUE_OK,
              curl_url_set(handle, CURLUPART_PASSWORD, password, 0) == CURLUE_OK else { return nil }
        return MediaURL(handle: handle)
    }

    /// This URL with no credentials.
    public var withoutCredentials: MediaURL {
        guard user != nil || password != nil else { return self }
        return withCredentials(user: nil, password: nil) ?? self
    }

    /// The port it connects to: the one written, or http's and https's
    /// default (nil for another scheme without one).
    public var effectivePort: Int? {
        port ?? Self.defaultPort(scheme)
    }

    public static func defaultPort(_ scheme: String) -> Int? {
        switch scheme {
        case "http", "dav": return 80
        case "https", "davs": return 443
        default: return nil
        }
    }

    public var isHTTP: Bool { scheme == "http" || scheme == "https" }

    /// The last segment of the path, still percent-encoded ("" for "/").
    public var lastPathSegment: Substring {
        path.split(separator: "/").last ?? ""
    }

    /// Whether `text` is a URL (it has a scheme and a host, as libcurl reads
    /// it), not a path or a bare name.
    public static func isURL(_ text: String) -> Bool {
        MediaURL(text) != nil
    }

    public var description: String { text }
}
