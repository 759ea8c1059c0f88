// A WebDAV collection (`dav://`, `davs://`) listed with one PROPFIND
// (Depth: 1) asking for the properties a file's record needs, so `ls -l`
// sends nothing more: subcollections are directories, files carry their
// length, type, ETag and date. Files are read as any http(s) URL is.
// Only direct children of the collection count: the collection itself is
// skipped, an href on another origin or not just below it is dropped, and
// so is an entry with an unusable value, each with a log line.
import Foundation
import MediaNetwork
import MediaSupport
import MediaStore

package struct WebDAVIndex: URLListing {
    /// The collection's http(s) URL, ending in `/`; `user:pass@` kept.
    package let url: String

    package init(url: String) {
        self.url = url
    }

    /// A multistatus larger than this is refused: 64 MiB is some 250,000 entries.
    package static let maxAnswerBytes = 64 << 20
    /// A size above this is hostile, as for a Content-Length.
    package static let maxLength: Int64 = 1 << 62

    static let propfindBody = Array("""
        <?xml version="1.0" encoding="utf-8"?>
        <D:propfind xmlns:D="DAV:"><D:prop><D:resourcetype/><D:getcontentlength/><D:getlastmodified/>\
        <D:getetag/><D:getcontenttype/></D:prop></D:propfind>
        """.utf8)

    /// The same, and the collection's `getctag`: asked only when the mount
    /// polls (decision 0049), as a server that has none answers a 404
    /// propstat for it in every entry.
    static let pollingPropfindBody = Array("""
        <?xml version="1.0" encoding="utf-8"?>
        <D:propfind xmlns:D="DAV:" xmlns:CS="\(PropfindReader.calendarServer)"><D:prop><D:resourcetype/>\
        <D:getcontentlength/><D:getlastmodified/><D:getetag/><D:getcontenttype/><CS:getctag/></D:prop></D:propfind>
        """.utf8)

    package func list(in context: ListingContext) throws -> [Source] {
        try list(in: context, body: Self.propfindBody).sources
    }

    /// One PROPFIND of depth 1 with `body`: the entries, and the
    /// collection's own response.
    func list(in context: ListingContext, body: [UInt8]) throws
        -> (sources: [Source], itself: PropfindReader.Response?) {
        let request = FetchRequest(url: url, method: .propfind,
                                   headers: ["Depth: 1", "Content-Type: application/xml; charset=utf-8"],
                                   body: body)
        let answer = try context.fetch(request, Self.maxAnswerBytes)
        guard answer.status == 207 else { throw failure(status: answer.status, http: context.http) }
        do {
            return try Self.parseListing(answer.body, base: url)
        } catch let error as MediaError {
            throw MediaError(error.errno, "\(origin): \(error.message)")
        }
    }

    /// What a PROPFIND answered with another status than 207 means.
    func failure(status: Int, http: HTTPOptions) -> MediaError {
        let said = "\(origin): HTTP \(status)"
        switch status {
        case 401, 403:
            return MediaError(EACCES, "\(said) (\(credentialsSent(http)))")
        case 404, 410:
            return MediaError(ENOENT, "\(said): no such collection")
        case 405, 501:
            return MediaError(EOPNOTSUPP, "\(said): the server does not answer PROPFIND, so it is no WebDAV"
                              + " server here; for its HTML index pages mount \(origin) instead")
        case 200..<300:
            return MediaError.io("\(said), not a WebDAV multistatus (207); for its HTML index pages mount"
                                 + " \(origin) instead")
        default:
            return MediaError.io(said)
        }
    }

    /// Whether this listing's request carried credentials, for a 401 or 403.
    func credentialsSent(_ http: HTTPOptions) -> String {
        if MediaError.userinfoRange(in: url) != nil { return "credentials were sent: user and password of the URL" }
        if http.headers(for: url, first: url).contains(where: HTTPOptions.carriesCredentials) {
            return "credentials were sent: an Authorization header"
        }
        if http.netrc { return "credentials from ~/.netrc were sent if it has an entry for the host" }
        return "no credentials were sent: give user:pass@ in the URL, or --netrc"
    }

    /// The sources of a multistatus answer to a PROPFIND of `base`, in its
    /// order; throws when the answer is not a multistatus.
    package static func parse(_ xml: Data, base: String) throws -> [Source] {
        try parseListing(xml, base: base).sources
    }

    /// The same, and the collection's own response, if it gave one.
    static func parseListing(_ xml: Data, base: String) throws
        -> (sources: [Source], itself: PropfindReader.Response?) {
        guard let collection = WebDAVCollection(url: base) else {
            throw MediaError(EINVAL, "malformed collection URL '\(MediaError.redacted(base))'")
        }
        var sources: [Source] = []
        var seen: Set<String> = []
        var dropped = 0
        var itself: PropfindReader.Response?
        try PropfindReader.read(xml) { response in
            switch source(of: response, in: collection) {
            case .success(let source?):
                if seen.insert(source.name).inserted { sources.append(source) }
            case .success(nil):
                // The collection itself: what a poll compares.
                itself = response
            case .failure(let why):
                dropped += 1
                // A line an entry, up to a point: a hostile answer may hold 200,000.
                guard dropped <= maxDropsLogged else { break }
                Log.warning("listing \(MediaError.redacted(base)): entry '\(MediaError.redacted(response.href).prefix(200))'"
                            + " dropped: \(why.message)")
            }
        }
        if dropped > maxDropsLogged {
            Log.warning("listing \(MediaError.redacted(base)): \(dropped - maxDropsLogged) more entries dropped")
        }
        return (sources, itself)
    }

    /// Dropped entries logged one by one; past them, a count.
    static let maxDropsLogged = 20

    /// The source a response names; nil for the collection itself; a
    /// failure saying why for an entry that is dropped.
    static func source(of response: PropfindReader.Response, in collection: WebDAVCollection)
        -> Result<Source?, MediaError> {
        if let defect = response.defect { return .failure(MediaError.io(defect)) }
        let name: String
        switch collection.place(of: response.href) {
        case .itself: return .success(nil)
        case .outside(let why): return .failure(MediaError.io(why))
        case .child(let child): name = child
        }
        let url = collection.url(of: name, isCollection: response.isCollection)
        if response.isCollection {
            return .success(Source(name: name, url: url, kind: .directory(WebDAVIndex(url: url))))
        }
        return info(of: response).map { Source(name: name, url: url, kind: .file($0)) }
    }

    /// A file's record as its properties give it; nil without a length (then
    /// it is probed); a failure for a value no header could carry.
    static func info(of response: PropfindReader.Response) -> Result<ContentInfo?, MediaError> {
        for (property, value) in [("getetag", response.etag), ("getlastmodified", response.lastModified),
                                  ("getcontenttype", response.contentType)] {
            if let value, value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) {
                return .failure(MediaError.io("control characters in its \(property)"))
            }
        }
        guard let text = response.contentLength, !text.isEmpty else { return .success(nil) }
        guard text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }), let length = Int64(text),
              length <= maxLength else {
            return .failure(MediaError.io("unusable getcontentlength '\(text.prefix(40))'"))
        }
        // A date that is no HTTP date is not a validator: the file stays, dated by the probe's answer.
        let date = response.lastModified.flatMap { HTTPDate.seconds($0) == nil ? nil : $0 }
        return .success(ContentInfo(length: length, contentType: response.contentType.flatMap { $0.isEmpty ? nil : $0 },
                                    etag: response.etag.flatMap(entityTag), lastModified: date,
                                    acceptsRanges: true))
    }

    /// A getetag as the ETag header spells it: some servers (wsgidav) leave
    /// out the quotes their GET answers put around it. A weak one is no
    /// validator here: If-Range refuses it, and Apache calls a file's tag
    /// weak in the second after a change and strong in a GET soon after,
    /// which would read as another version. The file keeps its date.
    static func entityTag(_ value: String) -> String? {
        if value.isEmpty || value.hasPrefix("W/") { return nil }
        return value.hasPrefix("\"") ? value : "\"\(value)\""
    }

    /// Whether a SOURCE URL names a WebDAV collection.
    package static func isDAV(_ url: String) -> Bool {
        let scheme = MediaURL.writtenScheme(of: url)
        return scheme == "dav" || scheme == "davs"
    }

    /// The http(s) URL of a `dav://` or `davs://` one, its path ending in
    /// `/` unless it names a file (`isCollection` false: an archive's URL).
    package static func httpURL(ofDAV url: String, isCollection: Bool = true) -> String {
        guard let authority = MediaURL.writtenAuthority(in: url), let scheme = MediaURL.writtenScheme(of: url) else {
            return url
        }
        let http = scheme == "davs" ? "https" : "http"
        // From the "://" on, as written: only the scheme changes.
        var rest = String(url[url.utf8.index(authority.lowerBound, offsetBy: -3)...])
        guard isCollection else { return http + rest }
        let end = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) ?? rest.endIndex
        if rest[..<end].last != "/" || rest.distance(from: rest.startIndex, to: end) == 3 { rest.insert("/", at: end) }
        return http + rest
    }
}

// A collection polled (decision 0049): one PROPFIND of depth 0 for the
// collection's own getetag, getlastmodified and getctag, compared with what
// its listing's answer said of it. Apache's mod_dav_fs gives a collection
// a getetag and getlastmodified from its directory's inode, size and
// mtime: they change when a name is added, removed or renamed in it (and
// a PUT, which writes a temporary file and renames it), not when a file is
// rewritten in place. Nextcloud and oCIS propagate a folder's getetag from
// everything below it. A collection that gives none of the three is listed
// at every poll.
extension WebDAVIndex: ChangePolling {
    static let pollBody = Array("""
        <?xml version="1.0" encoding="utf-8"?>
        <D:propfind xmlns:D="DAV:" xmlns:CS="\(PropfindReader.calendarServer)"><D:prop><D:getlastmodified/>\
        <D:getetag/><CS:getctag/></D:prop></D:propfind>
        """.utf8)
    /// A depth-0 answer is one response; more than this is not one.
    static let maxPollAnswerBytes = 64 << 10

    package func listWithToken(in context: ListingContext) throws -> (sources: [Source], token: ChangeToken?) {
        let (sources, itself) = try list(in: context, body: Self.pollingPropfindBody)
        return (sources, itself.flatMap(Self.token))
    }

    package func changeRequest(since token: ChangeToken?) -> FetchRequest {
        FetchRequest(url: url, method: .propfind, headers: ["Depth: 0", "Content-Type: application/xml; charset=utf-8"],
                     body: Self.pollBody)
    }

    package func verdict(on answer: TextFetch.Answer, since token: ChangeToken?) throws -> ChangeToken.Verdict {
        guard answer.status == 207 else {
            throw MediaError(ResponseHead(status: answer.status, headers: [:]).failure.errno,
                             "\(origin): HTTP \(answer.status) to a PROPFIND of depth 0")
        }
        guard let collection = WebDAVCollection(url: url) else {
            throw MediaError(EINVAL, "malformed collection URL '\(origin)'")
        }
        var itself: PropfindReader.Response?
        do {
            try PropfindReader.read(answer.body) { response in
                if collection.place(of: response.href) == .itself { itself = response }
            }
        } catch let error as MediaError {
            throw MediaError(error.errno, "\(origin): \(error.message)")
        }
        return compare(itself.flatMap(Self.token), with: token)
    }

    /// What a collection's own response says of it; nil when it says
    /// nothing usable. A weak getetag counts as its strong twin: Apache
    /// calls a tag weak in the second after a change and strong soon after.
    static func token(of response: PropfindReader.Response) -> ChangeToken? {
        guard response.defect == nil else { return nil }
        let etag = response.etag.map { $0.hasPrefix("W/") ? String($0.dropFirst(2)) : $0 }
        let parts = [etag, response.lastModified, response.ctag]
        guard parts.contains(where: { $0?.isEmpty == false }) else { return nil }
        return ChangeToken(of: parts.map { $0 ?? "" })
    }
}
