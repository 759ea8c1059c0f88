// An HTTP directory index (nginx autoindex, Apache, python's http.server)
// read as a list of entries. Only links below the listed URL count: no
// parent (`../`), no query-only sort links, no other hosts, no fragments.
import Foundation

public enum DirectoryListing {
    public struct Entry: Equatable, Sendable {
        public var name: String
        public var url: String
        public var isDirectory: Bool
    }

    /// The entries of an index page at `base` (which ends with `/`), in page order.
    public static func parse(html: String, base: String) -> [Entry] {
        guard let baseURL = URL(string: base), let basePath = URLComponents(string: base)?.percentEncodedPath else {
            return []
        }
        var seen: Set<String> = []
        var entries: [Entry] = []
        for href in hrefs(in: html) {
            if href.hasPrefix("?") || href.hasPrefix("#") { continue }
            guard let resolved = URL(string: href, relativeTo: baseURL)?.absoluteURL,
                  var components = URLComponents(url: resolved, resolvingAgainstBaseURL: true),
                  components.scheme == baseURL.scheme, components.host == baseURL.host, components.port == baseURL.port
            else { continue }
            if components.query != nil { continue }
            components.fragment = nil
            let path = components.percentEncodedPath
            guard path.hasPrefix(basePath), path.count > basePath.count else { continue }
            let rest = path.dropFirst(basePath.count)
            let isDirectory = rest.hasSuffix("/")
            let component = isDirectory ? rest.dropLast() : rest
            // Only direct children, and never a step up or a no-op step.
            guard !component.isEmpty, !component.contains("/") else { continue }
            let decoded = String(component).removingPercentEncoding ?? String(component)
            if decoded == "." || decoded == ".." { continue }
            guard let url = components.string, seen.insert(url).inserted else { continue }
            entries.append(Entry(name: decoded, url: url, isDirectory: isDirectory))
        }
        return entries
    }

    /// The values of `href` attributes of `<a>` tags, entities decoded.
    static func hrefs(in html: String) -> [String] {
        var result: [String] = []
        var rest = html[...]
        while let tag = rest.range(of: "<a", options: .caseInsensitive) {
            rest = rest[tag.upperBound...]
            // `<a ` only: not `<abbr`, `<area`, `<address`.
            guard let next = rest.first, next.isWhitespace else { continue }
            guard let close = rest.firstIndex(of: ">") else { break }
            let attributes = rest[..<close]
            rest = rest[close...]
            guard let hrefRange = attributes.range(of: "href", options: .caseInsensitive) else { continue }
            var value = attributes[hrefRange.upperBound...].drop(while: { $0 == " " })
            guard value.first == "=" else { continue }
            value = value.dropFirst().drop(while: { $0 == " " })
            let text: Substring
            if let quote = value.first, quote == "\"" || quote == "'" {
                let body = value.dropFirst()
                text = body[..<(body.firstIndex(of: quote) ?? body.endIndex)]
            } else {
                text = value.prefix(while: { !$0.isWhitespace })
            }
            result.append(decodeEntities(String(text)))
        }
        return result
    }

    private static func decodeEntities(_ text: String) -> String {
        guard text.contains("&") else { return text }
        return text.replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&#39;", with: "'")
            .replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
            .replacingOccurrences(of: "&amp;", with: "&")
    }
}
