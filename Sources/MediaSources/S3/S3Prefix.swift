// An S3 prefix (`s3://bucket/prefix/`) listed as a directory: ListObjectsV2
// with `delimiter=/`, every page followed by its continuation token (a
// prefix of 100,000 objects is 100 requests), CommonPrefixes as
// directories, Contents as files with the size, ETag and date the listing
// gives (so `ls -l` sends nothing else), the prefix's own key (a "folder
// marker") skipped. Files are the objects' plain URLs (S3Endpoint), read by
// the HTTP read path; CurlHop signs every request to the endpoint. One bad
// entry is dropped with a log line; an error answer says what S3 said.
import Foundation
import MediaSupport
import MediaStore
import MediaNetwork

package struct S3Prefix: Listing {
    /// Pages one listing follows at most: 100 million objects.
    package static let maxPages = 100_000

    package let bucket: String
    /// "" (the whole bucket) or a key prefix ending in `/`.
    package let prefix: String
    package let endpoint: S3Endpoint

    package init(bucket: String, prefix: String, endpoint: S3Endpoint) {
        self.bucket = bucket
        self.prefix = prefix
        self.endpoint = endpoint
    }

    /// An `s3://bucket[/prefix[/]]` argument; the prefix is the key's own
    /// text (not percent-decoded, as the AWS CLI takes it), made to end in `/`.
    package init(argument: String, endpoint: S3Endpoint) throws {
        guard Self.isS3(argument) else { throw MediaError(EINVAL, "'\(argument)' is not an s3:// URL") }
        let rest = argument.dropFirst("s3://".count)
        let bucket = String(rest.prefix { $0 != "/" })
        guard S3Endpoint.isBucketName(bucket) else {
            throw MediaError(EINVAL, "source '\(argument)': '\(bucket)' is not a bucket name "
                             + "(3-63 letters, digits, '.', '-')")
        }
        var prefix = String(rest.dropFirst(bucket.count).drop { $0 == "/" })
        if !prefix.isEmpty && !prefix.hasSuffix("/") { prefix += "/" }
        guard prefix.utf8.count <= 1024 else { throw MediaError(EINVAL, "source '\(argument)': prefix longer than 1,024 bytes") }
        self.init(bucket: bucket, prefix: prefix, endpoint: endpoint)
    }

    /// A subdirectory of a saved listing: the same bucket and endpoint,
    /// the prefix its URL gives verbatim.
    package func subdirectory(at url: String) -> any Listing {
        let rest = url.hasPrefix("s3://\(bucket)/") ? String(url.dropFirst("s3://\(bucket)/".count)) : prefix
        return S3Prefix(bucket: bucket, prefix: rest, endpoint: endpoint)
    }

    package static func isS3(_ argument: String) -> Bool { argument.lowercased().hasPrefix("s3://") }

    /// The mount's directory for an `s3://` argument, named after the
    /// prefix's last part (the bucket for a whole bucket).
    package static func source(forArgument argument: String, settings: S3Mount) throws -> Source {
        if let archive = try archive(argument: argument, endpoint: settings.endpoint) { return archive }
        let listing = try S3Prefix(argument: argument, endpoint: settings.endpoint)
        let name = listing.prefix.split(separator: "/").last.map(String.init) ?? listing.bucket
        return Source(name: FileNaming.safe(name), url: listing.origin, kind: .directory(listing))
    }

    /// An `s3://bucket/key` argument whose key names an archive (a `.zip`,
    /// a RAR volume; no `/` after it): the directory of its members, its
    /// sibling volumes found in the listing of its prefix. Nil for any other.
    static func archive(argument: String, endpoint: S3Endpoint) throws -> Source? {
        guard isS3(argument), !argument.hasSuffix("/") else { return nil }
        let whole = try S3Prefix(argument: argument, endpoint: endpoint)
        let key = String(whole.prefix.dropLast())
        let parent = key.lastIndex(of: "/").map { String(key[...$0]) } ?? ""
        guard !key.isEmpty, var archive = ArchiveSource(url: endpoint.objectURL(bucket: whole.bucket, key: key)) else {
            return nil
        }
        archive.directory = S3Prefix(bucket: whole.bucket, prefix: parent, endpoint: endpoint)
        return Source(name: FileNaming.safe(archive.folder), url: archive.url, kind: .directory(archive))
    }

    /// Control characters, legal in keys, shown as `?`: this names the
    /// directory in log lines.
    package var origin: String { "s3://\(bucket)/\(Self.printable(prefix))" }
    package var refreshes: Bool { true }
    package var bucketURL: String { endpoint.bucketURL(bucket) }

    /// A page's URL, its query in SigV4's canonical order and encoding.
    package func pageURL(after token: String?) -> String {
        var query: [String] = []
        if let token { query.append("continuation-token=" + S3Endpoint.encode(token)) }
        query.append("delimiter=%2F")
        query.append("list-type=2")
        if !prefix.isEmpty { query.append("prefix=" + S3Endpoint.encode(prefix)) }
        return bucketURL + "?" + query.joined(separator: "&")
    }

    package func list(in context: ListingContext) throws -> [Source] {
        try list(signedBy: context.http.s3(for: bucketURL, first: bucketURL)?.credentials) { url in
            try context.fetch(FetchRequest(url: url), TextFetch.maxBytes)
        }
    }

    /// Every page through `fetch`; `credentials` (what signs) for the
    /// errors and the reload after an expired token. Each page gets the
    /// listing's whole timeout: one listing of 100 pages may take longer.
    func list(signedBy credentials: S3Credentials?,
              fetch: (String) throws -> TextFetch.Answer) throws -> [Source] {
        try listPages(signedBy: credentials, fetch: fetch).sources
    }

    /// The same, and the token of its first page (ChangePolling).
    func listPages(signedBy credentials: S3Credentials?,
                   fetch: (String) throws -> TextFetch.Answer) throws -> (sources: [Source], token: ChangeToken?) {
        var firstToken: ChangeToken?
        var sources: [Source] = []
        var token: String?
        var pages = 0
        repeat {
            var answer = try fetch(pageURL(after: token))
            if let credentials, Self.isExpiredToken(answer) {
                credentials.reload()
                answer = try fetch(pageURL(after: token))
            }
            guard (200..<300).contains(answer.status) else {
                throw failure(status: answer.status, body: answer.body, credentials: credentials)
            }
            let page: S3ListPage
            do {
                page = try S3ListXML.page(answer.body)
            } catch let error as MediaError {
                throw MediaError(EIO, "\(origin): page \(pages + 1) of the listing: \(error.message)")
            }
            sources += entries(of: page)
            if pages == 0 { firstToken = Self.token(of: page) }
            pages += 1
            let next = page.isTruncated ? page.nextContinuationToken : nil
            if page.isTruncated && (next == nil || next == token) {
                throw MediaError(EIO, "\(origin): page \(pages) says more follow but gives no new continuation token")
            }
            guard pages < Self.maxPages || next == nil else {
                throw MediaError(EFBIG, "\(origin): more than \(Self.maxPages) pages (\(Self.maxPages / 1000) million objects)")
            }
            token = next
        } while token != nil
        return (sources, firstToken)
    }

    /// A page's directories and files, in the server's order; the bad ones
    /// dropped with a log line each.
    func entries(of page: S3ListPage) -> [Source] {
        var sources: [Source] = []
        for common in page.prefixes {
            guard common.hasPrefix(prefix), common.hasSuffix("/"), common.utf8.count <= 1024 else {
                Log.warning("\(origin): dropped common prefix outside the listed one or too long")
                continue
            }
            let name = String(common.dropFirst(prefix.count).dropLast())
            guard !name.isEmpty, !name.contains("/") else {
                Log.warning("\(origin): dropped common prefix '\(Self.shown(common))' (an empty or nested name)")
                continue
            }
            // The key's own text: the URL is the directory's identity, and
            // a saved listing makes the prefix again from it.
            sources.append(Source(name: name, url: "s3://\(bucket)/\(common)",
                                  kind: .directory(S3Prefix(bucket: bucket, prefix: common, endpoint: endpoint))))
        }
        for object in page.objects {
            if let source = file(object) { sources.append(source) }
        }
        return sources
    }

    private func file(_ object: S3ListPage.Object) -> Source? {
        let drop = { (why: String) -> Source? in
            Log.warning("\(origin): dropped object '\(Self.shown(object.key ?? ""))': \(why)")
            return nil
        }
        guard !object.tooLong else { return drop("a value longer than \(S3ListXML.maxText) bytes") }
        guard let key = object.key, key.hasPrefix(prefix), key.utf8.count <= 1024 else {
            return drop("no key below the prefix")
        }
        if key == prefix { return nil }
        let name = String(key.dropFirst(prefix.count))
        guard !name.contains("/") else { return drop("a name with '/'") }
        guard let sizeText = object.size, let size = Limits.length(sizeText.trimmingSpaces) else {
            return drop("size '\(Self.shown(object.size ?? ""))' is not a length")
        }
        var lastModified: String?
        if let date = object.lastModified {
            guard let http = Self.httpDate(iso8601: String(date.trimmingSpaces)) else {
                return drop("date '\(Self.shown(date))' is not an ISO 8601 time")
            }
            lastModified = http
        }
        let etag = object.etag.flatMap { Self.isHeaderValue($0) ? $0 : nil }
        return Source(name: name, url: endpoint.objectURL(bucket: bucket, key: key),
                      kind: .file(ContentInfo(length: size, etag: etag, lastModified: lastModified, acceptsRanges: true)))
    }

    static func isExpiredToken(_ answer: TextFetch.Answer) -> Bool {
        guard [400, 403].contains(answer.status), let code = S3ListXML.error(answer.body)?.code else {
            return false
        }
        return ["ExpiredToken", "TokenRefreshRequired", "RequestExpired"].contains(code)
    }

    /// What a failed page says: the directory, S3's code and message, and
    /// for a refusal whether keys were sent; for a bucket elsewhere, its region.
    func failure(status: Int, body: Data, credentials: S3Credentials?) -> MediaError {
        let answer = S3ListXML.error(body)
        let code = answer?.code.map(Self.shown) ?? ""
        var said = "HTTP \(status)" + (code.isEmpty ? "" : " \(code)")
        if let message = answer?.message.map(Self.shown), !message.isEmpty { said += ": \(message)" }
        let sent = credentials.map { "signed with \($0.description)" }
            ?? "no credentials were sent (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE)"
        if let region = answer.flatMap(Self.region(of:)), region != endpoint.region {
            return MediaError(EIO, "\(origin): bucket '\(bucket)' is in region '\(region)', not '\(endpoint.region)': "
                              + "mount with --s3-region \(region) (\(said))")
        }
        switch (status, code) {
        case (404, _) where code == "NoSuchBucket" || code.isEmpty:
            return MediaError(ENOENT, "\(origin): no bucket '\(bucket)' at \(MediaError.redacted(bucketURL)) (\(said))")
        case (401, _), (403, _):
            return MediaError(EACCES, "\(origin): access denied listing the directory, \(sent) (\(said))")
        case (301, _), (307, _), (400, "AuthorizationHeaderMalformed"):
            return MediaError(EIO, "\(origin): the bucket is at another endpoint or region (\(said))")
        default:
            let errno = ResponseHead(status: status, headers: [:]).failure.errno
            return MediaError(errno, "\(origin): \(said)")
        }
    }

    /// The region an error names: `<Region>`, else the one in `<Endpoint>`
    /// (`bucket.s3.eu-west-1.amazonaws.com`, `s3-eu-west-1.amazonaws.com`).
    static func region(of answer: S3ErrorAnswer) -> String? {
        if let region = answer.region?.trimmingSpaces, !region.isEmpty { return shown(String(region)) }
        guard let endpoint = answer.endpoint?.lowercased(), endpoint.hasSuffix(".amazonaws.com") else { return nil }
        let labels = endpoint.split(separator: ".")
        for (index, label) in labels.enumerated() {
            if label == "s3", index + 1 < labels.count - 2 { return shown(String(labels[index + 1])) }
            if label.hasPrefix("s3-") { return shown(String(label.dropFirst(3))) }
        }
        return nil
    }

    /// S3's `2026-12-02T00:35:53.000Z` as an HTTP date, the form
    /// Last-Modified takes; nil unless it is such a UTC time in years 1–9999.
    static func httpDate(iso8601 text: String) -> String? {
        let bytes = Array(text.utf8)
        func number(_ from: Int, _ count: Int) -> Int? {
            guard from + count <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[from..<(from + count)] {
                guard byte >= 48 && byte <= 57 else { return nil }
                value = value * 10 + Int(byte - 48)
            }
            return value
        }
        guard bytes.count >= 20, bytes.last == UInt8(ascii: "Z"), bytes[4] == UInt8(ascii: "-"),
              bytes[7] == UInt8(ascii: "-"), bytes[10] == UInt8(ascii: "T"), bytes[13] == UInt8(ascii: ":"),
              bytes[16] == UInt8(ascii: ":"),
              let year = number(0, 4), (1...9999).contains(year), let month = number(5, 2), (1...12).contains(month),
              let day = number(8, 2), (1...31).contains(day), let hour = number(11, 2), hour < 24,
              let minute = number(14, 2), minute < 60, let second = number(17, 2), second <= 60 else { return nil }
        // Only a fraction may stand between the seconds and the Z.
        if bytes.count > 20 {
            guard bytes[19] == UInt8(ascii: "."), bytes.count > 21,
                  bytes[20..<(bytes.count - 1)].allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
        }
        let days = HTTPDate.daysFromCivil(year: year, month: month, day: day)
        let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][((days % 7) + 7) % 7]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let yearText = String(repeating: "0", count: 4 - String(year).count) + String(year)
        let date = "\(weekday), \(two(day)) \(months[month - 1]) \(yearText) \(two(hour)):\(two(minute)):\(two(second)) GMT"
        return HTTPDate.seconds(date) != nil ? date : nil
    }

    /// Whether a value may stand in a header line (an ETag sent back in If-Range).
    static func isHeaderValue(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 256 && text.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7f }
    }

    /// A server's text in a log line: printable, at most 200 characters.
    static func shown(_ text: String) -> String {
        let printable = printable(text)
        return printable.count > 200 ? String(printable.prefix(200)) + "…" : printable
    }

    static func printable(_ text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7f ? "?" : $0 }))
    }
}

// A prefix polled (decision 0049): S3 has no cheap "changed since" for a
// prefix, so a poll asks for the first page of its listing (up to 1,000
// keys, one request, the same one a listing starts with) and compares its
// directories, keys, ETags and sizes with what the listing's first page
// said. A change only on a later page of a prefix over 1,000 entries is
// not seen by a poll: its listing's refresh (`--dir-cache-time`) finds it.
extension S3Prefix: ChangePolling {
    package func listWithToken(in context: ListingContext) throws -> (sources: [Source], token: ChangeToken?) {
        try listPages(signedBy: context.http.s3(for: bucketURL, first: bucketURL)?.credentials) { url in
            try context.fetch(FetchRequest(url: url), TextFetch.maxBytes)
        }
    }

    package func changeRequest(since token: ChangeToken?) -> FetchRequest {
        FetchRequest(url: pageURL(after: nil))
    }

    package func verdict(on answer: TextFetch.Answer, since token: ChangeToken?) throws -> ChangeToken.Verdict {
        guard (200..<300).contains(answer.status) else {
            let code = S3ListXML.error(answer.body)?.code.map(Self.shown) ?? ""
            throw MediaError(ResponseHead(status: answer.status, headers: [:]).failure.errno,
                             "\(origin): HTTP \(answer.status)\(code.isEmpty ? "" : " \(code)") to a poll")
        }
        do {
            return compare(Self.token(of: try S3ListXML.page(answer.body)), with: token)
        } catch let error as MediaError {
            throw MediaError(EIO, "\(origin): a poll's page: \(error.message)")
        }
    }

    /// A page's directories, and its objects' keys, ETags and sizes.
    static func token(of page: S3ListPage) -> ChangeToken {
        ChangeToken(of: page.prefixes.map { "p \($0)" }
                    + page.objects.map { "o \($0.key ?? "") \($0.etag ?? "") \($0.size ?? "")" })
    }
}
