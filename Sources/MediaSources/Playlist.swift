// M3U and extended M3U playlists as sources: each entry becomes a file,
// named from its #EXTINF title when there is one. An HLS media or master
// playlist (#EXT-X- tags) is a presentation, not a list of files: served
// over http, it becomes its VOD's files (HLSListing); read from a local
// file, whose segments have no base to resolve against, it is refused.
// A playlist is read once, at mount (from a file or over HTTP), into the
// mount root.
import Foundation
import MediaSupport
import MediaStore
import MediaNetwork

package struct Playlist: Listing {
    /// A path, or an http(s) URL.
    package let location: String

    /// The name a list file gave it, for an HLS playlist's main file.
    package let name: String?

    package init(location: String, name: String? = nil) {
        self.location = location
        self.name = name
    }

    package var origin: String { MediaError.redacted(location) }
    package var refreshes: Bool { false }

    package func list(in context: ListingContext) throws -> [Source] {
        let entries: [(name: String?, url: String)]
        if MediaURL.hasScheme(location) {
            let text: String
            do {
                text = try context.fetchText(location)
            } catch let error as MediaError {
                throw MediaError(error.errno, "playlist \(error.message)")
            }
            if HLSPlaylist.isHLS(text) {
                return try HLSListing.sources(url: location, text: text, name: name, in: context)
            }
            entries = try Self.parse(text, base: location, origin: origin)
        } else {
            guard let data = FileManager.default.contents(atPath: location) else {
                throw MediaError(EINVAL, "playlist \(location) cannot be read")
            }
            entries = try Self.parse(String(decoding: data, as: UTF8.self), base: nil, origin: location)
        }
        return entries.map { Source.at(url: $0.url, name: $0.name) }
    }

    /// Whether a SOURCE names a playlist, by its extension.
    package static func isPlaylist(_ source: String) -> Bool {
        let lower = (MediaURL.hasScheme(source) ? MediaURL(source)?.decodedPath ?? "" : source).lowercased()
        return lower.hasSuffix(".m3u") || lower.hasSuffix(".m3u8")
    }

    /// The entries of a playlist: (name from #EXTINF, absolute URL).
    /// Relative entries resolve against `base` (the playlist's own URL).
    package static func parse(_ text: String, base: String?, origin: String) throws -> [(name: String?, url: String)] {
        var entries: [(name: String?, url: String)] = []
        var title: String?
        let baseURL = base.flatMap(MediaURL.init)
        let lines = text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
        for (index, raw) in lines.enumerated() {
            var line = String(raw.trimmingSpaces)
            if index == 0, line.hasPrefix("\u{FEFF}") { line.removeFirst() }
            if line.isEmpty { continue }
            if line.hasPrefix("#EXT-X-") {
                throw MediaError(EINVAL, "\(origin): an HLS playlist (\(line.prefix(while: { $0 != ":" }))), "
                                 + "not a list of files; give its http(s) URL to mount it as one file")
            }
            if line.hasPrefix("#EXTINF:") {
                // "#EXTINF:duration[ attributes],Title" — the title follows the first comma.
                title = line.firstIndex(of: ",").map { String(line[line.index(after: $0)...].trimmingSpaces) }
                if title?.isEmpty == true { title = nil }
                continue
            }
            if line.hasPrefix("#") { continue }
            let lineOrigin = "\(origin):\(index + 1)"
            let url: String
            if MediaURL.hasScheme(line) {
                url = line
            } else if let baseURL, let resolved = baseURL.resolving(line)?.text {
                url = resolved
            } else {
                throw MediaError(EINVAL, "\(lineOrigin): '\(MediaError.redacted(line))' is not a URL (relative entries need a playlist served over http)")
            }
            try Source.validate(url: url, origin: lineOrigin)
            entries.append((title.map { name(title: $0, url: url) }, url))
            title = nil
        }
        return entries
    }

    /// A title as a file name, with the extension of the URL's path.
    static func name(title: String, url: String) -> String {
        let path = MediaURL(url)?.decodedPath ?? ""
        let last = path.split(separator: "/").last.map(String.init) ?? ""
        let ext = last.lastIndex(of: ".").map { String(last[$0...]) } ?? ""
        let usable = ext.count > 1 && ext.count <= FileNaming.maxExtensionBytes && !title.lowercased().hasSuffix(ext.lowercased())
        return title + (usable ? ext : "")
    }
}
