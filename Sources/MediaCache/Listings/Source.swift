// The files a mount shows: a name in the mount root and the URL behind it.
// Turning command-line arguments into sources happens here, before anything
// is mounted, so bad input is refused with a message naming it.
import Foundation

public struct Source: Equatable, Sendable {
    public var name: String
    public var url: String
    /// A URL ending in `/`: an HTTP directory index, shown as a directory.
    public var isDirectory: Bool

    public init(name: String, url: String, isDirectory: Bool = false) {
        self.name = name
        self.url = url
        self.isDirectory = isDirectory
    }

    /// The URL for logs, xattrs and status: credentials removed.
    public var displayURL: String { MediaError.redacted(url) }

    /// Reads SOURCE arguments (URLs, playlists, list files) into sources
    /// with safe names, in argument order; the catalog makes names unique.
    public static func parse(arguments: [String],
                             fetchText: (String) throws -> String = { _ in throw MediaError.io("no network") })
        throws -> [Source] {
        var entries: [(name: String?, url: String)] = []
        for argument in arguments {
            if Playlist.isPlaylist(argument) {
                if argument.contains("://") {
                    try validate(url: argument, origin: "source '\(MediaError.redacted(argument))'")
                    let text: String
                    do {
                        text = try fetchText(argument)
                    } catch let error as MediaError {
                        throw MediaError(error.errno, "playlist \(error.message)")
                    }
                    entries += try Playlist.parse(text, base: argument, origin: MediaError.redacted(argument))
                } else {
                    guard let data = FileManager.default.contents(atPath: argument) else {
                        throw MediaError(EINVAL, "playlist \(argument) cannot be read")
                    }
                    entries += try Playlist.parse(String(decoding: data, as: UTF8.self), base: nil, origin: argument)
                }
            } else if argument.contains("://") {
                try validate(url: argument, origin: "source '\(MediaError.redacted(argument))'")
                entries.append((nil, argument))
            } else {
                entries += try readList(path: argument)
            }
        }
        return entries.map { entry in
            Source(name: entry.name.map(FileNaming.safe) ?? FileNaming.name(forURL: entry.url), url: entry.url,
                   isDirectory: URLComponents(string: entry.url)?.path.hasSuffix("/") ?? false)
        }
    }

    /// A list file: one URL per line, `#` comments and blank lines ignored,
    /// `NAME<TAB>URL` to choose the name.
    static func readList(path: String) throws -> [(name: String?, url: String)] {
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
            try validate(url: url, origin: origin)
            result.append((name, url))
        }
        return result
    }

    static func validate(url: String, origin: String) throws {
        guard let components = URLComponents(string: url), let scheme = components.scheme else {
            throw MediaError(EINVAL, "\(origin): malformed URL '\(MediaError.redacted(url))'")
        }
        guard ["http", "https"].contains(scheme.lowercased()) else {
            throw MediaError(EINVAL, "\(origin): unsupported scheme '\(scheme)' in '\(MediaError.redacted(url))' (only http and https)")
        }
        guard let host = components.host, !host.isEmpty else {
            throw MediaError(EINVAL, "\(origin): malformed URL '\(MediaError.redacted(url))' (no host)")
        }
    }
}
