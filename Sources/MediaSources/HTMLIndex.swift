// An HTTP directory index (nginx autoindex, Apache, python's http.server)
// read as a list of entries. Only links below the listed URL count: no
// parent (`../`), no query-only sort links, no other hosts, no fragments.
// Most pages say names and links only: their files are probed for their
// sizes. nginx's autoindex (its default `autoindex_exact_size on`) writes
// each file's exact length after its link's date; that length is taken, so
// a listing of 10,000 files is one request, not 10,001. It carries no
// validator: the file's first answer names its version (see
// `ChangeDetection.confirmation`), and a length that no longer holds is a change.
import Foundation
import MediaSupport
import MediaStore
import MediaNetwork

package struct HTMLIndex: URLListing {
    /// The page's URL, ending in `/`.
    package let url: String

    package init(url: String) {
        self.url = url
    }

    package func list(in context: ListingContext) throws -> [Source] {
        Self.parse(html: try context.fetchText(url), base: url).map(Self.source)
    }

    package struct Entry: Equatable, Sendable {
        package var name: String
        package var url: String
        package var isDirectory: Bool
        /// The exact length the page wrote beside the link (nginx's row), if any.
        package var length: Int64?

        package init(name: String, url: String, isDirectory: Bool, length: Int64? = nil) {
            self.name = name
            self.url = url
            self.isDirectory = isDirectory
            self.length = length
        }
    }

    /// The entries of an index page at `base` (which ends with `/`), in page order.
    /// Linear in the page: a library's directory may list 100,000 files.
    package static func parse(html: String, base: String) -> [Entry] {
        guard let resolver = Resolver(base: base) else { return [] }
        var seen: Set<String> = []
        var entries: [Entry] = []
        for link in links(in: html) {
            guard var entry = resolver.plainEntry(link.href) ?? resolver.resolvedEntry(link.href),
                  seen.insert(entry.url).inserted else { continue }
            if !entry.isDirectory { entry.length = link.length }
            entries.append(entry)
        }
        return entries
    }

    /// Turns hrefs into entries below one base URL.
    struct Resolver {
        let base: String
        let baseURL: MediaURL
        let basePath: String
        /// Whether a plain relative href may simply be appended to `base`.
        let appendable: Bool

        init?(base: String) {
            guard let baseURL = MediaURL(base) else { return nil }
            self.base = base
            self.baseURL = baseURL
            basePath = baseURL.path
            appendable = base.hasSuffix("/") && !base.contains("?") && !base.contains("#")
        }

        /// The entry of an href that is one plain path segment (`name`,
        /// `name/`, percent-encoded, nothing URL resolution would change),
        /// without parsing a URL; nil: not that simple, resolve it.
        func plainEntry(_ href: String) -> Entry? {
            guard appendable else { return nil }
            var bytes = Substring(href).utf8
            let isDirectory = bytes.last == UInt8(ascii: "/")
            if isDirectory { bytes = bytes.dropLast() }
            guard !bytes.isEmpty, bytes.first != UInt8(ascii: ".") else { return nil }
            var percentDigits = 0
            for byte in bytes {
                if percentDigits > 0 {
                    guard Self.isHexDigit(byte) else { return nil }
                    percentDigits -= 1
                } else if byte == UInt8(ascii: "%") {
                    percentDigits = 2
                } else if !Self.isPlain(byte) {
                    return nil
                }
            }
            guard percentDigits == 0 else { return nil }
            let component = String(Substring(bytes))
            let decoded = component.removingPercentEncoding ?? component
            guard decoded != ".", decoded != ".." else { return nil }
            return Entry(name: decoded, url: base + href, isDirectory: isDirectory)
        }

        /// The entry of any href, resolved against the base as a browser
        /// would; nil unless it names a direct child of the base.
        func resolvedEntry(_ href: String) -> Entry? {
            if href.hasPrefix("?") || href.hasPrefix("#") { return nil }
            guard let resolved = baseURL.resolving(href)?.withoutFragment, resolved.query == nil,
                  resolved.scheme == baseURL.scheme, resolved.host == baseURL.host,
                  resolved.effectivePort == baseURL.effectivePort else { return nil }
            let path = resolved.path
            guard path.hasPrefix(basePath), path.count > basePath.count else { return nil }
            let rest = path.dropFirst(basePath.count)
            let isDirectory = rest.hasSuffix("/")
            let component = isDirectory ? rest.dropLast() : rest
            // Only direct children, and never a step up or a no-op step.
            guard !component.isEmpty, !component.contains("/") else { return nil }
            let decoded = String(component).removingPercentEncoding ?? String(component)
            if decoded == "." || decoded == ".." { return nil }
            return Entry(name: decoded, url: resolved.text, isDirectory: isDirectory)
        }

        /// Unreserved and sub-delimiter bytes, and `@`: a path segment's
        /// own characters, none of which resolution rewrites. Not `:`
        /// (a first segment with one reads as a scheme).
        private static func isPlain(_ byte: UInt8) -> Bool {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"):
                return true
            default:
                return "-._~!$&'()*+,;=@".utf8.contains(byte)
            }
        }

        private static func isHexDigit(_ byte: UInt8) -> Bool {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"),
                 UInt8(ascii: "A")...UInt8(ascii: "F"):
                return true
            default:
                return false
            }
        }
    }

    /// The values of `href` attributes of `<a>` tags, entities decoded,
    /// each with the length its row writes after the link, if it is one of
    /// nginx's. Scans the page's bytes once: Foundation's searches on a
    /// substring copied the rest of the page each time.
    static func links(in html: String) -> [(href: String, length: Int64?)] {
        var result: [(href: String, length: Int64?)] = []
        var html = html
        html.withUTF8 { page in
            var i = 0
            let n = page.count
            while i + 2 < n {
                // `<a ` only: not `<abbr`, `<area`, `<address`.
                guard page[i] == UInt8(ascii: "<"), lower(page[i + 1]) == UInt8(ascii: "a"), isSpace(page[i + 2]) else {
                    i += 1
                    continue
                }
                var close = i + 3
                while close < n && page[close] != UInt8(ascii: ">") { close += 1 }
                guard close < n else { break }
                if let value = hrefValue(page, from: i + 3, to: close) {
                    result.append((decodeEntities(String(decoding: UnsafeBufferPointer(rebasing: page[value]),
                                                         as: UTF8.self)),
                                   nginxRowLength(page, after: close + 1)))
                }
                i = close
            }
        }
        return result
    }

    /// The length in nginx's autoindex row whose link text starts at
    /// `start`: `text</a>` then spaces, `dd-Mon-yyyy hh:mm`, spaces, and
    /// the length's digits ending the line (`-` for a directory). Nothing
    /// else is taken: a row of another shape (Apache's `1.2M`, a page's
    /// own text) is probed. At most 18 digits, read by `Limits.length`
    /// (one past `Limits.maxLength` is probed too).
    static func nginxRowLength(_ page: UnsafeBufferPointer<UInt8>, after start: Int) -> Int64? {
        let n = page.count
        var i = start
        // The link's text: nginx writes no tag inside it.
        while i < n && page[i] != UInt8(ascii: "<") && page[i] != UInt8(ascii: "\n") { i += 1 }
        guard i + 4 <= n, page[i + 1] == UInt8(ascii: "/"), lower(page[i + 2]) == UInt8(ascii: "a"),
              page[i + 3] == UInt8(ascii: ">") else { return nil }
        i += 4
        func spaces() -> Bool {
            let from = i
            while i < n && page[i] == UInt8(ascii: " ") { i += 1 }
            return i > from
        }
        func digits(_ count: Int) -> Bool {
            for _ in 0..<count {
                guard i < n, isDigit(page[i]) else { return false }
                i += 1
            }
            return true
        }
        func letters(_ count: Int) -> Bool {
            for _ in 0..<count {
                guard i < n, (page[i] | 0x20) >= UInt8(ascii: "a"), (page[i] | 0x20) <= UInt8(ascii: "z") else { return false }
                i += 1
            }
            return true
        }
        func byte(_ ascii: Unicode.Scalar) -> Bool {
            guard i < n, page[i] == UInt8(ascii: ascii) else { return false }
            i += 1
            return true
        }
        // `05-Dec-2026 17:34`
        guard spaces(), digits(2), byte("-"), letters(3), byte("-"), digits(4), byte(" "),
              digits(2), byte(":"), digits(2), spaces() else { return nil }
        let from = i
        while i < n, isDigit(page[i]), i - from < 19 { i += 1 }
        guard i - from <= 18, i == n || page[i] == UInt8(ascii: "\r") || page[i] == UInt8(ascii: "\n") else { return nil }
        return Limits.length(String(decoding: UnsafeBufferPointer(rebasing: page[from..<i]), as: UTF8.self))
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    /// Where the href attribute's value lies among a tag's attributes, `lo..<hi`.
    private static func hrefValue(_ page: UnsafeBufferPointer<UInt8>, from lo: Int, to hi: Int) -> Range<Int>? {
        var i = lo
        while i + 4 <= hi {
            guard lower(page[i]) == UInt8(ascii: "h"), lower(page[i + 1]) == UInt8(ascii: "r"),
                  lower(page[i + 2]) == UInt8(ascii: "e"), lower(page[i + 3]) == UInt8(ascii: "f") else {
                i += 1
                continue
            }
            var j = i + 4
            while j < hi && page[j] == UInt8(ascii: " ") { j += 1 }
            // The first "href" decides, as before: not followed by `=`, no link.
            guard j < hi, page[j] == UInt8(ascii: "=") else { return nil }
            j += 1
            while j < hi && page[j] == UInt8(ascii: " ") { j += 1 }
            if j < hi, page[j] == UInt8(ascii: "\"") || page[j] == UInt8(ascii: "'") {
                let quote = page[j]
                var end = j + 1
                while end < hi && page[end] != quote { end += 1 }
                return (j + 1)..<end
            }
            var end = j
            while end < hi, !isSpace(page[end]) { end += 1 }
            return j..<end
        }
        return nil
    }

    /// ASCII lower case of a byte (HTML tag and attribute names).
    private static func lower(_ byte: UInt8) -> UInt8 { byte >= 65 && byte <= 90 ? byte + 32 : byte }

    /// HTML's white space between attributes: space, tab, line breaks.
    private static func isSpace(_ byte: UInt8) -> Bool { byte == 32 || (byte >= 9 && byte <= 13) }

    private static func decodeEntities(_ text: String) -> String {
        guard text.contains("&") else { return text }
        return text.replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&#39;", with: "'")
            .replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
            .replacingOccurrences(of: "&amp;", with: "&")
    }
}

// An index page polled (decision 0049): a GET with `If-None-Match` and
// `If-Modified-Since` when the page gave validators, answered 304 with no
// body when it is unchanged; else the whole page, whose entries (links,
// kinds, nginx's lengths) are hashed and compared, not its bytes: a page
// that writes the time it was made is not changed by it.
extension HTMLIndex: ChangePolling {
    package func listWithToken(in context: ListingContext) throws -> (sources: [Source], token: ChangeToken?) {
        let entries = Self.parse(html: try context.fetchText(url), base: url)
        return (entries.map(Self.source), Self.token(of: entries))
    }

    package func changeRequest(since token: ChangeToken?) -> FetchRequest {
        var headers: [String] = []
        if let etag = token?.etag { headers.append("If-None-Match: \(etag)") }
        if let date = token?.lastModified { headers.append("If-Modified-Since: \(date)") }
        return FetchRequest(url: url, headers: headers)
    }

    package func verdict(on answer: TextFetch.Answer, since token: ChangeToken?) throws -> ChangeToken.Verdict {
        // A 304 counts only when validators were sent, which only a token has.
        if answer.status == 304, let token, token.etag != nil || token.lastModified != nil {
            return .unchanged(token)
        }
        guard (200..<300).contains(answer.status) else {
            throw MediaError(ResponseHead(status: answer.status, headers: [:]).failure.errno,
                             "\(origin): HTTP \(answer.status) to a poll")
        }
        let entries = Self.parse(html: String(decoding: answer.body, as: UTF8.self), base: url)
        let date = ChangeToken.validator(answer.headers["last-modified"]).flatMap { HTTPDate.seconds($0) == nil ? nil : $0 }
        return compare(Self.token(of: entries, etag: ChangeToken.validator(answer.headers["etag"]), lastModified: date),
                       with: token)
    }

    static func source(_ entry: Entry) -> Source {
        Source(name: entry.name, url: entry.url,
               kind: entry.isDirectory ? .directory(HTMLIndex(url: entry.url))
                   : .file(entry.length.map { ContentInfo(length: $0) }))
    }

    /// What a listing of the page would show: each entry's kind, length and URL.
    static func token(of entries: [Entry], etag: String? = nil, lastModified: String? = nil) -> ChangeToken {
        ChangeToken(of: entries.map { entry in
            "\(entry.isDirectory ? "d" : "f") \(entry.length.map { String($0) } ?? "-") \(entry.url)"
        }, etag: etag, lastModified: lastModified)
    }
}
