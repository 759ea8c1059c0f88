// A directory of an SFTP server (`sftp://[USER@]HOST[:PORT]/PATH/`) listed
// with one SFTP readdir through an SFTPSession: subdirectories are
// directories, regular files carry the size and mtime the listing gives
// (so `ls -l` sends nothing more), anything else (a socket, a device, a
// link to nowhere) is left out. Files are read by the fetcher as
// `sftp://` URLs (SFTPFetcher, on the same kept sessions). A file whose
// size or mtime a refresh finds changed is a new version (the listing's
// ChangeDetection).
//
// A directory argument is listed by the mount's check of its server (the
// login it needs anyway), not stat'ed: the first lookup then takes that
// listing instead of asking again (`FirstListing`), which across an ocean
// is the open, the reads and the close, a third of a second before a
// cold command's first byte.
import Foundation
import MediaSupport
import MediaStore
import MediaNetwork

package struct SFTPDirectory: URLListing {
    /// The directory's URL, ending in `/`; `user:pass@` kept.
    package let url: String
    /// The mount's check's listing, for the first `list` soon after it.
    private let first: FirstListing?

    package init(url: String) {
        self.url = url
        first = nil
    }

    init(url: String, first: FirstListing) {
        self.url = url
        self.first = first
    }

    package static func isSFTP(_ url: String) -> Bool {
        MediaURL.writtenScheme(of: url) == "sftp"
    }

    package func list(in context: ListingContext) throws -> [Source] {
        if let entries = first?.take(now: context.clock.monotonic()) { return sources(of: entries) }
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

    /// What the mount's check learned of an argument.
    private enum Checked { case listed([SFTPSession.Entry]), stat(SFTPSession.Entry) }

    /// The source of an `sftp://` argument, its server asked once before
    /// anything is mounted: a host key known_hosts does not vouch for, or a
    /// login refused, refuses the mount; a directory is listed (its first
    /// lookup's listing, `FirstListing`), a file gets the size and date of
    /// one stat, as does a directory whose listing fails (its error then
    /// names what it is). A server that cannot be reached now does not
    /// stop the mount (what is cached and saved is served), with a warning.
    package static func source(forArgument argument: String, context: ListingContext) throws -> Source {
        var source = Source.at(url: argument)
        guard let parsed = MediaURL(argument) else { return source }
        let shown = MediaError.redacted(argument)
        let path = SFTPSession.remotePath(parsed.path)
        do {
            // The listing, else the stat (whose errors name what it is).
            let checked = try SFTPSessions.with(url: argument, options: context.http,
                                                timeout: context.timeout) { session -> Checked in
                if source.isDirectory, let entries = try? session.list(path: path) { return .listed(entries) }
                return .stat(try session.stat(path: path))
            }
            let entry: SFTPSession.Entry
            switch checked {
            case .listed(let entries):
                let first = FirstListing(entries, at: context.clock.monotonic())
                source.kind = .directory(SFTPDirectory(url: argument, first: first))
                return source
            case .stat(let stat): entry = stat
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

/// A directory's listing made at mount, taken by its first `list` if that
/// comes within `life` seconds (a command started right after the mount);
/// a later one lists anew, so no lookup is answered from an old listing
/// as if it were fresh.
final class FirstListing: Sendable {
    static let life = 30.0
    private let entries: Locked<[SFTPSession.Entry]?>
    private let listedAt: Double

    init(_ entries: [SFTPSession.Entry], at now: Double) {
        self.entries = Locked(entries)
        listedAt = now
    }

    /// The entries, once; nil after, or when they are older than `life`.
    func take(now: Double) -> [SFTPSession.Entry]? {
        entries.withLock { entries in
            defer { entries = nil }
            return now - listedAt <= Self.life ? entries : nil
        }
    }
}
