// The one place that decides whether a URL is a presentation (a VOD whose
// files a listing yields) or a list of files, and how it is read: a DASH
// MPD by its name; an `.m3u`/`.m3u8` by its text, an HLS playlist being a
// VOD and any other M3U a list of files. The command line, a list file's
// lines and a listing's entries all ask here.
import Foundation
import MediaSupport
import MediaStore
import MediaNetwork

package enum Presentation {
    /// The Listing a URL (or, for an M3U, a local path) named `name` is read
    /// through when it names an MPD or a playlist; nil for any other.
    package static func listing(at location: String, name: String? = nil) -> (any Listing)? {
        if DASHListing.isMPD(location) { return DASHListing(url: location, name: name) }
        if Playlist.isPlaylist(location) { return Playlist(location: location, name: name) }
        return nil
    }

    /// The VOD's files of a file a listing named (a `talk.m3u8` entry), or
    /// nil when it is a playlist of files, not a presentation (an M3U of
    /// songs stays the file the listing shows).
    package static func files(of source: Source, in context: ListingContext) throws -> [Source]? {
        if DASHListing.isMPD(source.url) {
            return try DASHListing(url: source.url, name: source.name).list(in: context)
        }
        let text: String
        do {
            text = try context.fetchText(source.url)
        } catch let error as MediaError {
            throw MediaError(error.errno, "playlist \(error.message)")
        }
        guard HLSPlaylist.isHLS(text) else { return nil }
        return try HLSListing.sources(url: source.url, text: text, name: source.name, in: context)
    }

    /// Whether a listed file's URL may be a VOD's: an http(s) HLS playlist
    /// or DASH MPD, by its path's extension.
    package static func mayName(_ url: String) -> Bool {
        let lower = url.lowercased()
        guard lower.hasPrefix("http://") || lower.hasPrefix("https://") else { return false }
        // Asked of every entry of every listing: a URL with no escape names
        // no VOD unless it holds the suffix its path would end in, which
        // spares it the two URL parses below (30,000 instructions an entry:
        // 0.1 s a listing of 10,000 files). An escape may spell the suffix.
        guard mayHoldSuffix(Array(lower.utf8)) else { return false }
        return Playlist.isPlaylist(url) || DASHListing.isMPD(url)
    }

    /// Whether a lower-cased URL has an escape, `.m3u` or `.mpd` in it.
    private static func mayHoldSuffix(_ bytes: [UInt8]) -> Bool {
        if bytes.contains(UInt8(ascii: "%")) { return true }
        let suffixes: [[UInt8]] = [Array(".m3u".utf8), Array(".mpd".utf8)]
        for start in bytes.indices where bytes[start] == UInt8(ascii: ".") {
            for suffix in suffixes where bytes[start...].starts(with: suffix) { return true }
        }
        return false
    }
}
