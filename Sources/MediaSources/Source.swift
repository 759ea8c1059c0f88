// A name the mount shows and what is behind it: a file's URL (with what its
// listing knew of it), or a directory and the Listing that lists it.
// Turning command-line arguments into sources happens here, before anything
// is mounted, so bad input is refused with a message naming it: each
// argument is a URL (a `dav(s)://` one a WebDAV collection, listed on first
// lookup), or a Listing (a playlist, a list file) read now.
import Foundation
import MediaSupport
import MediaStore
import MediaNetwork

public struct Source: Equatable, Sendable {
    package enum Kind: Sendable {
        /// A file, and its length, type and validators when the listing
        /// that named it said them (nil: probe it).
        case file(ContentInfo?)
        /// A file made of segments (an HLS or DASH VOD, an archive's
        /// member): what the mount's SegmentedFetcher serves its URL from,
        /// and its info when the parts' lengths are listed.
        case vod(SegmentedVOD, ContentInfo?)
        /// A directory, listed on first lookup by its Listing.
        case directory(any Listing)
    }

    package var name: String
    package var url: String
    package var kind: Kind

    package init(name: String, url: String, kind: Kind = .file(nil)) {
        self.name = name
        self.url = url
        self.kind = kind
    }

    /// The source a URL names on its own: an archive's (a `.zip`, a RAR
    /// volume) is a directory of its members; a `dav://` or `davs://` one is
    /// a WebDAV collection, read over http(s); an http(s) one ending in `/`
    /// is a directory listed by its HTTP index page, any other a file.
    package static func at(url: String, name: String? = nil) -> Source {
        if let archive = ArchiveSource(url: url) {
            return Source(name: FileNaming.safe(name ?? archive.folder), url: archive.url, kind: .directory(archive))
        }
        if WebDAVIndex.isDAV(url) {
            let http = WebDAVIndex.httpURL(ofDAV: url)
            return Source(name: name.map(FileNaming.safe) ?? FileNaming.name(forURL: http), url: http,
                          kind: .directory(WebDAVIndex(url: http)))
        }
        if FTPDirectory.isFTP(url) {
            let isDirectory = MediaURL(url)?.path.hasSuffix("/") ?? false
            return Source(name: name.map(FileNaming.safe) ?? FileNaming.name(forURL: url), url: url,
                          kind: isDirectory ? .directory(FTPDirectory(url: url)) : .file(nil))
        }
        if SFTPDirectory.isSFTP(url) {
            let path = MediaURL(url)?.path ?? "/"
            if path.hasSuffix("/") {
                return Source(name: name.map(FileNaming.safe) ?? FileNaming.name(forURL: url), url: url,
                              kind: .directory(SFTPDirectory(url: url)))
            }
            return Source(name: name.map(FileNaming.safe) ?? FileNaming.name(forURL: url), url: url, kind: .file(nil))
        }
        let isDirectory = MediaURL(url)?.path.hasSuffix("/") ?? false
        return Source(name: name.map(FileNaming.safe) ?? FileNaming.name(forURL: url), url: url,
                      kind: isDirectory ? .directory(HTMLIndex(url: url)) : .file(nil))
    }

    package var isDirectory: Bool {
        if case .directory = kind { return true }
        return false
    }

    /// What its listing knew of a file; nil for a directory or when unknown.
    package var listedInfo: ContentInfo? {
        switch kind {
        case .file(let info), .vod(_, let info): return info
        case .directory: return nil
        }
    }

    /// The VOD a file is made of; nil for an ordinary file or a directory.
    package var vod: SegmentedVOD? {
        if case .vod(let vod, _) = kind { return vod }
        return nil
    }

    /// The directory's Listing; nil for a file.
    package var listing: (any Listing)? {
        if case .directory(let listing) = kind { return listing }
        return nil
    }

    /// The URL for logs, xattrs and status: credentials removed.
    package var displayURL: String { MediaError.redacted(url) }

    public static func == (a: Source, b: Source) -> Bool {
        a.name == b.name && a.url == b.url && a.isDirectory == b.isDirectory && a.listedInfo == b.listedInfo
            && a.listing?.origin == b.listing?.origin
    }

    /// Reads SOURCE arguments (URLs, playlists, list files, `s3://`
    /// prefixes given `s3`) into sources with safe names, in argument
    /// order; the catalog makes names unique. An HLS playlist's URL (or
    /// one in a list file) becomes its VOD's files, as does a DASH MPD's,
    /// `hlsVariant` choosing among a master playlist's variants or an
    /// adaptation set's representations.
    package static func parse(arguments: [String], clock: Clock, s3: S3Mount? = nil,
                             hlsVariant: HLSListing.VariantChoice = .highest, http: HTTPOptions = HTTPOptions(),
                             fetchText: @escaping @Sendable (String) throws -> String = { _ in
                                 throw MediaError.io("no network")
                             }) throws -> [Source] {
        try read(arguments: arguments, clock: clock, s3: s3, hlsVariant: hlsVariant, http: http, saved: nil,
                 fetchText: fetchText).sources
    }

    /// `parse`, reading a playlist or MPD argument from the documents
    /// `saved` kept of it when there are (no request: a remount with its
    /// server gone serves what is cached), and saving those it fetches.
    /// `fromSaved`: the listings read from saved documents, which the
    /// mount reads again in the background.
    package static func read(arguments: [String], clock: Clock, s3: S3Mount? = nil, hlsVariant: HLSListing.VariantChoice = .highest,
                            http: HTTPOptions = HTTPOptions(), saved: SavedPresentations?,
                            fetchText: @escaping @Sendable (String) throws -> String)
        throws -> (sources: [Source], fromSaved: [any Listing]) {
        // `http` reaches what a listing fetches besides text (an HLS key).
        var context = ListingContext(clock: clock, http: http, fetchText: fetchText)
        context.hlsVariant = hlsVariant
        var sources: [Source] = []
        var fromSaved: [any Listing] = []
        for argument in arguments {
            if let s3, S3Prefix.isS3(argument) {
                sources.append(try S3Prefix.source(forArgument: argument, settings: s3))
                continue
            }
            if let listing = try listing(forArgument: argument) {
                var listed: [Source]
                if let saved, MediaURL.hasScheme(argument) {
                    if let offline = saved.offline(context, { try listing.list(in: $0) }) {
                        Log.info("\(listing.origin): \(offline.count) files from its saved copy; reading it again in the background")
                        listed = offline
                        fromSaved.append(listing)
                    } else {
                        listed = try saved.live(context) { try listing.list(in: $0) } ?? []
                    }
                } else {
                    listed = try listing.list(in: context)
                }
                sources += listed.map { source in
                    var safe = source
                    safe.name = FileNaming.safe(source.name)
                    return safe
                }
            } else if SFTPDirectory.isSFTP(argument) {
                try validate(url: argument, origin: "source '\(MediaError.redacted(argument))'")
                sources.append(try SFTPDirectory.source(forArgument: argument, context: context))
            } else {
                try validate(url: argument, origin: "source '\(MediaError.redacted(argument))'")
                sources.append(at(url: argument))
            }
        }
        return (sources, fromSaved)
    }

    /// Whether the mount's root is the one directory source `parsed` holds
    /// (its entries at the mountpoint, as rclone, mountpoint-s3 and
    /// httpdirfs show a remote): only for one argument that is a directory
    /// URL (an HTML index, a `dav(s)://` collection, an `sftp://` or
    /// `ftp(s)://` directory, an `s3://` prefix).
    /// Several arguments, a file or a playlist or list file (whose entries
    /// are the sources, even one directory) give a name per source.
    package static func isMountRoot(arguments: [String], parsed: [Source]) -> Bool {
        guard arguments.count == 1, parsed.count == 1, parsed[0].isDirectory else { return false }
        if S3Prefix.isS3(arguments[0]) { return true }
        // A plain URL: a playlist or list file has a Listing of its own.
        return (try? listing(forArgument: arguments[0])) == nil
    }

    /// The Listing a SOURCE argument is read through; nil for a plain URL.
    static func listing(forArgument argument: String) throws -> (any Listing)? {
        if let presentation = Presentation.listing(at: argument) {
            if MediaURL.hasScheme(argument) {
                try validate(url: argument, origin: "source '\(MediaError.redacted(argument))'")
            }
            return presentation
        }
        return MediaURL.hasScheme(argument) ? nil : ListFile(path: argument)
    }

    /// Refuses, naming `origin` and why, a URL that is malformed, of
    /// another scheme than http(s), dav(s), sftp or ftp(s), or ambiguous: one that libcurl
    /// (which connects) and the user, or a server, would read differently.
    package static func validate(url: String, origin: String) throws {
        let shown = MediaError.redacted(url)
        guard let authority = MediaURL.writtenAuthority(in: url), let scheme = MediaURL.writtenScheme(of: url) else {
            throw MediaError(EINVAL, "\(origin): malformed URL '\(shown)'")
        }
        guard ["http", "https", "dav", "davs", "sftp", "ftp", "ftps"].contains(scheme) else {
            throw MediaError(EINVAL, "\(origin): unsupported scheme '\(url[..<url.firstIndex(of: ":")!])' in '\(shown)'"
                             + " (only http, https, dav, davs, sftp, ftp and ftps)")
        }
        let written = url[authority]
        // libcurl takes the first '@' as the border of the user information
        // and refuses the rest; a user who wrote two meant one of them encoded.
        if written.filter({ $0 == "@" }).count > 1 {
            throw MediaError(EINVAL, "\(origin): refused URL '\(shown)': its authority has more than one '@' "
                             + "(percent-encode an '@' in a user name or password as %40)")
        }
        if written.contains(where: { $0.isWhitespace || $0 == "\\" || $0.unicodeScalars.contains { $0.value < 0x20 } }) {
            throw MediaError(EINVAL, "\(origin): malformed URL '\(shown)'")
        }
        // What follows the user information: empty, or a port alone, is no host
        // (libcurl would take "http:///x" as host "x").
        let hostAndPort = written.split(separator: "@", omittingEmptySubsequences: false).last ?? ""
        if hostAndPort.isEmpty || hostAndPort.hasPrefix(":") {
            throw MediaError(EINVAL, "\(origin): malformed URL '\(shown)' (no host)")
        }
        if let problem = ambiguity(of: url) {
            throw MediaError(EINVAL, "\(origin): refused URL '\(shown)': \(problem)")
        }
        guard let parsed = MediaURL(url) else {
            throw MediaError(EINVAL, "\(origin): malformed URL '\(shown)'")
        }
        if parsed.fragment != nil {
            throw MediaError(EINVAL, "\(origin): refused URL '\(shown)': it has a #fragment, which is never sent to "
                             + "the server (write '#' in a name as %23)")
        }
    }

    /// What in a URL's text parsers read differently, or a user did not
    /// mean (a space, a backslash, a control character): nil when nothing.
    static func ambiguity(of url: String) -> String? {
        if let bad = url.unicodeScalars.first(where: {
            $0 == " " || $0 == "\\" || $0.properties.isWhitespace || $0.value < 0x20 || $0.value == 0x7F
        }) {
            let shown = bad == " " ? "a space" : bad == "\\" ? "a backslash" : "U+\(String(bad.value, radix: 16, uppercase: true))"
            return "it holds \(shown), which parsers read differently (percent-encode it, e.g. %20 for a space)"
        }
        return nil
    }
}
