// Where a PROPFIND href lies relative to the collection listed: the
// collection itself, one of its direct children (and its name), or outside.
// Hrefs come as absolute URLs or absolute paths, percent-encoded or not,
// collections with or without their trailing slash: they are compared by
// decoded path segments, and a child's URL is built anew from the
// collection's URL and its name, so it never names another origin.
import Foundation
import MediaNetwork
import MediaSupport
import MediaStore

struct WebDAVCollection {
    enum Place: Equatable {
        case itself
        case child(String)
        case outside(String)
    }

    /// The collection's URL, ending in `/`.
    let url: String
    let origin: HTTPOrigin
    /// The decoded segments of its path.
    let segments: [String]
    /// Its path as its URL writes it, ending in `/`.
    let encodedPath: String

    /// What a name may keep unencoded in a URL: RFC 3986's unreserved bytes.
    private static let unreserved = CharacterSet(
        charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    init?(url: String) {
        guard url.hasSuffix("/"), let origin = HTTPOrigin(url: url),
              let path = MediaURL(url)?.path,
              let segments = Self.segments(of: path) else { return nil }
        self.url = url
        self.origin = origin
        self.segments = segments
        encodedPath = path.hasSuffix("/") ? path : path + "/"
    }

    func place(of href: String) -> Place {
        let href = String(href.trimmingSpaces)
        let path: Substring
        if MediaURL.hasScheme(href) {
            guard let parsed = MediaURL(href), let other = HTTPOrigin(parsed) else {
                return .outside("not an http(s) URL")
            }
            guard other == origin else { return .outside("on another origin (\(other.host):\(other.port))") }
            path = parsed.path[...]
        } else if href.hasPrefix("/") {
            path = href[...]
        } else if href.isEmpty {
            return .outside("an empty href")
        } else {
            return place(of: encodedPath + href)
        }
        // Most servers write the collection's path as its URL does: then only
        // the child's segment need be decoded.
        if path.hasPrefix(encodedPath) {
            let rest = path.dropFirst(encodedPath.count)
            let segment = rest.hasSuffix("/") ? rest.dropLast() : rest
            if !segment.isEmpty, !segment.contains("/"), segment != ".", segment != ".." {
                let text = String(segment)
                let name = text.removingPercentEncoding ?? text
                return name == "." || name == ".." ? .outside("named '\(name)'") : .child(name)
            }
        }
        guard let found = Self.segments(of: path) else { return .outside("a path above the server's root") }
        guard found.count >= segments.count, Array(found.prefix(segments.count)) == segments else {
            return .outside("not below the collection")
        }
        switch found.count - segments.count {
        case 0: return .itself
        case 1:
            let name = found[segments.count]
            if name == "." || name == ".." { return .outside("named '\(name)'") }
            return .child(name)
        default: return .outside("not a direct child of the collection")
        }
    }

    /// The URL of a child named `name`: the collection's URL and the name,
    /// percent-encoded; a collection's ends in `/`.
    func url(of name: String, isCollection: Bool) -> String {
        url + (name.addingPercentEncoding(withAllowedCharacters: Self.unreserved) ?? name) + (isCollection ? "/" : "")
    }

    /// A path's segments, each percent-decoded (a segment that is no valid
    /// encoding is taken as it is), empty ones and `.` left out, `..`
    /// applied; nil when `..` climbs above the root.
    static func segments<S: StringProtocol>(of path: S) -> [String]? {
        var result: [String] = []
        for raw in path.split(separator: "/") {
            if raw == "." { continue }
            if raw == ".." {
                guard result.popLast() != nil else { return nil }
                continue
            }
            let text = String(raw)
            result.append(text.removingPercentEncoding ?? text)
        }
        return result
    }
}
