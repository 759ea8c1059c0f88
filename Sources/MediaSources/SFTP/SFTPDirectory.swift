// A directory of an SFTP server (`sftp://[USER@]HOST[:PORT]/PATH/`) listed
// with one SFTP readdir through an SFTPSession: subdirectories are
// directories, regular files carry the size and mtime the listing gives
// (so `ls -l` sends nothing more), anything else (a socket, a device, a
// link to nowhere) is left out. Files are read by the fetcher as
// `sftp://` URLs (SFTPFetcher, on the same kept sessions). A file whose
// size or mtime a refresh finds changed is a new version (the listing's
// ChangeDetection).
import Foundation
import MediaSupport
import MediaStore
import MediaNetwork

package struct SFTPDirectory: URLListing {
    /// The directory's URL, ending in `/`; `user:pass@` kept.
    package let url: String

    package init(url: String) {
        self.url = url
    }

    package static func isSFTP(_ url: String) -> Bool {
        MediaURL.writtenScheme(of: url) == "sftp"
    }

    package func list(in context: ListingContext) throws -> [Source] {
        guard let parsed = MediaURL(url) else { throw MediaError(EINVAL, "\(origin): malformed URL") }
        let entries = try SFTPSessions.with(url: url, options: context.http, timeout: context.timeout) { session in
            try session.list(path: SFTPSession.remotePath(parsed.path))
        }
        return sources(of: entries)
    }

    /// The sources of a directory's entries, in the server's order.
    func sources(of entries: [SFTPSession.Entry]) -> [Source] {
        var sources: [Source] = []
        for entry in entries {
            if entry.isDirectory {
                let child = childURL(entry.name, isDirectory: true)
                sources.append(Source(name: entry.name, url: child, kind: .directory(SFTPDirectory(url: child))))
            } else if entry.isRegular, let size = entry.size {
                let date = entry.mtime.flatMap(HTTPDate.text(seconds:))
                sources.append(Source(name: entry.name, url: childURL(entry.name, isDirectory: false),
                                      kind: .file(ContentInfo(length: size, lastModified: date, acceptsRanges: true))))
            }
        }
        return sources
    }

    /// A child's URL: this one's and the name percent-encoded (all but
    /// RFC 3986's unreserved characters), `/` after a directory's.
    func childURL(_ name: String, isDirectory: Bool) -> String {
        url + Self.encoded(name) + (isDirectory ? "/" : "")
    }

    static func encoded(_ name: String) -> String {
        var text = ""
        for byte in name.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                 UInt8(ascii: "~"):
                text.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                text += String(format: "%%%02X", byte)
            }
        }
        return text
    }

    /// The source of an `sftp://` argument, its server asked once before
    /// anything is mounted: a host key known_hosts does not vouch for, or a
    /// login refused, refuses the mount; a directory is listed on its first
    /// lookup, a file gets the size and date of one stat. A server that
    /// cannot be reached now does not stop the mount (what is cached and
    /// saved is served), with a warning.
    package static func source(forArgument argument: String, context: ListingContext) throws -> Source {
        let source = Source.at(url: argument)
        guard let parsed = MediaURL(argument) else { return source }
        let shown = MediaError.redacted(argument)
        do {
            let entry = try SFTPSessions.with(url: argument, options: context.http, timeout: context.timeout) { session in
                try session.stat(path: SFTPSession.remotePath(parsed.path))
            }
            if source.isDirectory {
                guard entry.isDirectory else {
                    throw MediaError(ENOTDIR, "source '\(shown)': not a directory on the server")
                }
                return source
            }
            guard entry.isRegular, let size = entry.size else {
                throw MediaError(EISDIR, "source '\(shown)': not a regular file on the server (a directory's URL ends in '/')")
            }
            var file = source
            file.kind = .file(ContentInfo(length: size, lastModified: entry.mtime.flatMap(HTTPDate.text(seconds:)),
                                          acceptsRanges: true))
            return file
        } catch let error as MediaError where [EHOSTUNREACH, ECONNREFUSED, ETIMEDOUT, EIO].contains(error.errno) {
            Log.warning("source '\(shown)': \(error.message); mounting with what is cached")
            return source
        }
    }
}
