// An indexed archive as a directory of the mount: its members under their
// own paths (subfolders for the folders in them), each a file made of
// ranges of its volumes, served as a VOD's segments are (SegmentedVOD:
// the mount's SegmentedFetcher turns a read into ranged GETs of the
// volumes it crosses). A member's URL is the first volume's with
// `#member=PATH`: a cache key of its own, never sent. Its validator is
// its extents' and the volumes' validators' digest, so a volume that
// changes makes each member in it a new version. Listed from memory:
// made when the listing that holds the volumes was read.
import Foundation
import MediaStore
import MediaSupport
import MediaNetwork

package struct ArchiveFolder: Listing {
    /// The set's first volume's URL, for logs.
    let url: String
    /// Every member, with its path in the archive.
    let members: [(path: [String], source: Source)]
    /// This folder's path in the archive ([] for the archive itself).
    let prefix: [String]

    package init(url: String, members: [(path: [String], source: Source)], prefix: [String]) {
        self.url = url
        self.members = members
        self.prefix = prefix
    }

    package var origin: String { MediaError.redacted(url) + (prefix.isEmpty ? "" : " (\(prefix.joined(separator: "/")))") }
    package var refreshes: Bool { false }

    package func list(in context: ListingContext) throws -> [Source] {
        entries
    }

    /// Its files and folders: listed from memory, no request.
    package var entries: [Source] {
        var sources: [Source] = []
        var folders = Set<String>()
        for (path, source) in members where path.count > prefix.count && Array(path.prefix(prefix.count)) == prefix {
            let name = path[prefix.count]
            if path.count == prefix.count + 1 {
                var file = source
                file.name = name
                sources.append(file)
            } else if folders.insert(name).inserted {
                let folder = ArchiveFolder(url: url, members: members, prefix: prefix + [name])
                sources.append(Source(name: name, url: url + "#folder=" + (prefix + [name]).joined(separator: "/"),
                                      kind: .directory(folder)))
            }
        }
        return sources
    }

    /// The archive's members as files: `volumes` are the set's URLs in
    /// the caller's order (the index's extents name them by position), with
    /// the lengths and validators their heads were answered with.
    package static func members(of index: ArchiveIndex, volumes: [String],
                        validators: [(length: Int64, etag: String?, lastModified: String?)]) -> [(path: [String], source: Source)] {
        let version = validators.map { "\($0.length) \($0.etag ?? "") \($0.lastModified ?? "")" }.joined(separator: "\n")
        return index.members.compactMap { member in
            let path = member.path.split(separator: "/").map(String.init)
            guard !path.isEmpty, member.extents.allSatisfy({ volumes.indices.contains($0.volume) }) else { return nil }
            let parts = member.extents.map { extent in
                HLSPlaylist.Part(url: volumes[extent.volume], range: extent.range, resource: validators.indices.contains(extent.volume)
                    ? HLSPlaylist.Part.Resource(length: validators[extent.volume].length, etag: validators[extent.volume].etag,
                                                lastModified: validators[extent.volume].lastModified) : nil)
            }
            let key = volumes[0] + "#member=" + (member.path.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? "")
            let vod = SegmentedVOD(url: key, parts: parts, contentType: contentType(of: path.last!), version: version,
                                   lastModified: member.mtime.map(httpDate), isArchiveMember: true)
            guard let lengths = vod.listedLengths, let layout = try? vod.layout(lengths: lengths) else { return nil }
            let source = Source(name: path.last!, url: key, kind: .vod(vod, vod.info(layout)))
            return (path, source)
        }
    }

    /// A member's type, by its extension (what players and media servers
    /// look at); octet-stream for the rest.
    static func contentType(of name: String) -> String {
        let types = ["mkv": "video/x-matroska", "mp4": "video/mp4", "m4v": "video/mp4", "avi": "video/x-msvideo",
                     "ts": "video/mp2t", "m2ts": "video/mp2t", "mov": "video/quicktime", "webm": "video/webm",
                     "mp3": "audio/mpeg", "flac": "audio/flac", "m4a": "audio/mp4", "srt": "application/x-subrip",
                     "nfo": "text/plain", "txt": "text/plain", "jpg": "image/jpeg", "png": "image/png"]
        let ext = name.split(separator: ".").last.map { $0.lowercased() } ?? ""
        return types[ext] ?? "application/octet-stream"
    }

    /// Seconds since 1970 as an HTTP date, what a file's mtime is read from.
    static func httpDate(_ seconds: Int64) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: Date(timeIntervalSince1970: Double(seconds)))
    }
}
