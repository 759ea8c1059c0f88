// A list file as a source: one URL per line, `#` comments and blank lines
// ignored, `NAME<TAB>URL` to choose the name. Read once, at mount, into the
// mount root; a bad line stops the mount with its file and line number.
import Foundation
import MediaSupport
import MediaStore
import MediaNetwork

package struct ListFile: Listing {
    package let path: String

    package init(path: String) {
        self.path = path
    }

    package var origin: String { path }
    package var refreshes: Bool { false }

    package func list(in context: ListingContext) throws -> [Source] {
        try Self.read(path: path).flatMap { line -> [Source] in
            // An HLS playlist's or a DASH MPD's line is its VOD's files.
            guard let presentation = Presentation.listing(at: line.url, name: line.name) else {
                return [Source.at(url: line.url, name: line.name)]
            }
            return try presentation.list(in: context)
        }
    }

    /// Its lines, as (the name chosen, if any; the URL).
    static func read(path: String) throws -> [(name: String?, url: String)] {
        guard let data = FileManager.default.contents(atPath: path) else {
            var isDirectory: ObjCBool = false
            let exists = FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
            let why = !exists ? "no such file" : isDirectory.boolValue ? "is a directory" : "cannot be read"
            throw MediaError(EINVAL, "source '\(path)' is neither an http(s) URL nor a readable list file (\(why))")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw MediaError(EINVAL, "list file \(path) is not UTF-8 text")
        }
        var result: [(name: String?, url: String)] = []
        // "\r\n" is one Character in Swift: split on any newline, not "\n".
        let lines = text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
        for (index, rawLine) in lines.enumerated() {
            let origin = "\(path):\(index + 1)"
            var name: String?
            var url = String(rawLine.trimmingSpaces)
            if url.isEmpty || url.hasPrefix("#") { continue }
            // The tab is looked for before trimming, which would eat a leading one.
            if let tab = rawLine.firstIndex(of: "\t") {
                name = String(rawLine[..<tab].trimmingSpaces)
                url = String(rawLine[rawLine.index(after: tab)...].trimmingSpaces)
                if name!.isEmpty { throw MediaError(EINVAL, "\(origin): empty name before the tab") }
            }
            try Source.validate(url: url, origin: origin)
            result.append((name, url))
        }
        return result
    }
}
