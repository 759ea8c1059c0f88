// One hop of a request and the one libcurl setup every request gets (file
// transfers, probes, listings, playlists), with the one redirect rule.
// libcurl never follows a redirect itself: a handle that did would keep what
// it was given for the first URL, so each hop is a fresh handle carrying
// only what its origin may see (HTTPOptions decides what that is).
// Credentials go as Basic at once, as they always have; a 401 that asks for
// Digest instead is answered by one more hop to the same URL, and the origin
// is remembered, so its later requests answer Digest's challenge at once.
import CCurl
#if canImport(Glibc)
import Glibc
import MediaSupport
#endif

package final class CurlHop {
    package static let maxRedirects = 10
    /// The statuses that say "the resource is over there".
    package static let redirectStatuses: Set<Int> = [301, 302, 303, 307, 308]

    package let easy: UnsafeMutableRawPointer
    package let url: String
    /// Redirects followed to get here.
    package let redirects: Int
    package let request: FetchRequest
    private let options: HTTPOptions
    private var headerList: UnsafeMutablePointer<curl_slist>?
    /// Whether this hop may send credentials (its URL's `user:pass@`, or netrc).
    private var hasCredentials = false
    /// Whether it answers a Digest challenge rather than send Basic.
    private var digest: Bool

    /// The origins whose servers asked for Digest, so far in this process.
    private static let digestOrigins = Locked<Set<HTTPOrigin>>([])

    /// The first hop: `request.url` itself.
    package convenience init(_ request: FetchRequest, options: HTTPOptions) throws {
        try self.init(url: request.url, redirects: 0, request: request, options: options, digest: false)
    }

    private init(url: String, redirects: Int, request: FetchRequest, options: HTTPOptions, digest: Bool) throws {
        CurlFetcher.initializeLibrary()
        guard let easy = curl_easy_init() else { throw MediaError.io("cannot start a transfer") }
        self.easy = easy
        self.url = url
        self.redirects = redirects
        self.request = request
        self.options = options
        self.digest = digest
        configure()
    }

    deinit {
        curl_easy_cleanup(easy)
        curl_slist_free_all(headerList)
    }

    private func configure() {
        // A LIST is a wildcard transfer of every name in the directory.
        _ = mediafs_easy_setopt_string(easy, CURLOPT_URL, request.method == .list ? url + "*" : url)
        _ = mediafs_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        _ = mediafs_easy_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 0)
        _ = mediafs_easy_setopt_string(easy, CURLOPT_PROTOCOLS_STR, isSFTP ? "sftp" : isFTP ? "ftp,ftps" : "http,https")
        _ = mediafs_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT, CurlFetcher.connectTimeoutSeconds)
        _ = mediafs_easy_setopt_long(easy, CURLOPT_LOW_SPEED_LIMIT, 1)
        _ = mediafs_easy_setopt_long(easy, CURLOPT_LOW_SPEED_TIME, CurlFetcher.stallSeconds)
        if request.method != .head {
            _ = mediafs_easy_setopt_long(easy, CURLOPT_BUFFERSIZE, CurlFetcher.receiveBufferSize)
        }
        _ = mediafs_easy_setopt_long(easy, CURLOPT_TCP_KEEPALIVE, 1)
        _ = mediafs_easy_setopt_string(easy, CURLOPT_USERAGENT, "mediafs/\(MediaCacheVersion.string)")
        // Unset, libcurl takes the proxy from the environment, as users
        // expect. A password in the proxy URL becomes Proxy-Authorization
        // for the proxy alone: libcurl keeps proxy and server headers apart.
        if let proxy = options.proxy {
            _ = mediafs_easy_setopt_string(easy, CURLOPT_PROXY, proxy)
        }
        if let caFile = options.caFile {
            _ = mediafs_easy_setopt_string(easy, CURLOPT_CAINFO, caFile)
            _ = mediafs_easy_setopt_string(easy, CURLOPT_PROXY_CAINFO, caFile)
        }
        switch request.method {
        case .head: _ = mediafs_easy_setopt_long(easy, CURLOPT_NOBODY, 1)
        case .get: break
        case .propfind, .mlsd: _ = mediafs_easy_setopt_string(easy, CURLOPT_CUSTOMREQUEST, request.method.rawValue)
        case .list: _ = mediafs_easy_setopt_long(easy, CURLOPT_WILDCARDMATCH, 1)
        }
        if let body = request.body {
            _ = mediafs_easy_setopt_long(easy, CURLOPT_POSTFIELDSIZE, body.count)
            _ = body.withUnsafeBufferPointer { bytes in
                mediafs_easy_setopt_pointer(easy, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: bytes.baseAddress))
            }
        }
        if isSFTP { configureSSH() }
        if isFTP { configureFTP() }
        if let range = request.range {
            let last = range.upperBound == FetchRequest.toTheEnd ? "" : "\(range.upperBound - 1)"
            _ = mediafs_easy_setopt_string(easy, CURLOPT_RANGE, "\(range.lowerBound)-\(last)")
        }
        let s3 = options.s3(for: url, first: request.url)
        if let s3 {
            // Keys are object names: `a/../b` is not `b`.
            _ = mediafs_easy_setopt_long(easy, CURLOPT_PATH_AS_IS, 1)
            if let credentials = s3.credentials { sign(for: s3, with: credentials.current()) }
        }
        // A signed hop carries its keys in the signature, never netrc's.
        let netrc = s3?.credentials == nil && options.usesNetrc(for: url, first: request.url)
        if netrc {
            _ = mediafs_easy_setopt_long(easy, CURLOPT_NETRC, Int(CURL_NETRC_OPTIONAL.rawValue))
        }
        // This hop's URL carries `user:pass@` only at the first origin (see
        // `credentialed`), and netrc is read only there.
        hasCredentials = netrc || MediaError.userinfoRange(in: url) != nil
        if hasCredentials, !digest, let origin = HTTPOrigin(url: url) {
            digest = Self.digestOrigins.withLock { $0.contains(origin) }
        }
        if hasCredentials && digest {
            _ = mediafs_easy_setopt_long(easy, CURLOPT_HTTPAUTH, mediafs_auth_digest)
        }
        for line in options.headers(for: url, first: request.url) + request.headers {
            headerList = curl_slist_append(headerList, line)
        }
        if let validator = request.ifRange {
            headerList = curl_slist_append(headerList, "If-Range: \(validator)")
        }
        if headerList != nil { _ = mediafs_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, headerList) }
    }

    /// Whether this hop reads an SFTP server's file (libcurl's sftp://,
    /// through libssh2): no headers, no redirects, a range by seek.
    package var isSFTP: Bool { scheme == "sftp" }
    /// Whether this hop is FTP (`ftp://`, explicit TLS as `--ftp-tls` says;
    /// `ftps://`, implicit TLS): a range by REST, a listing by MLSD.
    package var isFTP: Bool { scheme == "ftp" || scheme == "ftps" }
    /// Whether it reads a file of a protocol without HTTP's heads, whose
    /// head the fetcher makes (RemoteFileHead).
    package var readsRemoteFile: Bool { isSFTP || isFTP }
    private var scheme: String? { MediaURL.writtenScheme(of: url) }

    /// TLS on `ftp://` as `--ftp-tls` says (required by default: a password
    /// never crosses in clear unless asked); the file's date by MDTM; no
    /// CWD per directory (one round trip each): commands name whole paths.
    private func configureFTP() {
        if scheme == "ftp" {
            _ = mediafs_easy_setopt_long(easy, CURLOPT_USE_SSL, options.ftpTLS.curlValue)
        }
        _ = mediafs_easy_setopt_long(easy, CURLOPT_FILETIME, 1)
        _ = mediafs_easy_setopt_long(easy, CURLOPT_FTP_FILEMETHOD, Int(CURLFTPMETHOD_NOCWD.rawValue))
    }

    /// The host key checked against known_hosts and pinned to the one the
    /// listing's session verified; keys and the agent offered as ssh does;
    /// the login the URL names, else the user's. A password comes from the
    /// URL or, with --netrc, ~/.netrc (set above), never from here.
    private func configureSSH() {
        _ = mediafs_easy_setopt_string(easy, CURLOPT_SSH_KNOWNHOSTS, options.ssh.knownHosts)
        // One stat a transfer: the mtime that tells a changed file (RemoteFileHead).
        _ = mediafs_easy_setopt_long(easy, CURLOPT_FILETIME, 1)
        if let origin = HTTPOrigin(url: url), let key = SSHHostKey.verifiedKey(for: origin) {
            _ = mediafs_easy_setopt_string(easy, CURLOPT_SSH_HOST_PUBLIC_KEY_SHA256, key.sha256)
        }
        var types = Int(CURLSSH_AUTH_PUBLICKEY) | Int(CURLSSH_AUTH_PASSWORD)
        if options.ssh.agent { types |= Int(CURLSSH_AUTH_AGENT) }
        _ = mediafs_easy_setopt_long(easy, CURLOPT_SSH_AUTH_TYPES, types)
        if let key = options.ssh.identities.first {
            _ = mediafs_easy_setopt_string(easy, CURLOPT_SSH_PRIVATE_KEYFILE, key)
        }
        if MediaURL(url)?.user == nil {
            _ = mediafs_easy_setopt_string(easy, CURLOPT_USERNAME, options.ssh.defaultUser)
        }
    }

    /// SigV4 by libcurl, over the headers set here and the range. S3
    /// wants the payload's hash in a header of its own; libcurl 7.88 sends
    /// none, and hashes the (empty) body our requests have.
    private func sign(for s3: S3Origin, with key: S3Key) {
        _ = mediafs_easy_setopt_string(easy, CURLOPT_AWS_SIGV4, s3.sigV4)
        _ = mediafs_easy_setopt_string(easy, CURLOPT_USERPWD, "\(key.accessKeyID):\(key.secretAccessKey)")
        headerList = curl_slist_append(headerList, "x-amz-content-sha256: \(S3Origin.emptyPayloadHash)")
        if let token = key.sessionToken {
            headerList = curl_slist_append(headerList, "x-amz-security-token: \(token)")
        }
    }

    /// The response status; 0 before the status line.
    package var status: Int {
        var status = 0
        _ = mediafs_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        return status
    }

    /// Whether the response (once its status is in) sends the request on,
    /// so its body is not the answer. Checked while the body arrives, when
    /// libcurl has not resolved the Location yet.
    package var isRedirect: Bool { Self.redirectStatuses.contains(status) }

    /// Whether the response is a 401 asking for Digest, with credentials
    /// this hop sent as Basic: the next hop answers the challenge.
    package var isDigestChallenge: Bool {
        guard hasCredentials, !digest, status == 401 else { return false }
        var offered = 0
        _ = mediafs_easy_getinfo_long(easy, CURLINFO_HTTPAUTH_AVAIL, &offered)
        return offered & mediafs_auth_digest != 0
    }

    /// Whether the response sends the request on (a redirect, a Digest
    /// challenge), so its body is not the answer.
    package var isPassedOn: Bool { isRedirect || isDigestChallenge }

    /// The absolute URL of the Location header, as libcurl resolves it once
    /// the response is complete.
    private var location: String? {
        var target: UnsafeMutablePointer<CChar>?
        guard mediafs_easy_getinfo_string(easy, CURLINFO_REDIRECT_URL, &target) == CURLE_OK, let target else {
            return nil
        }
        return String(cString: target)
    }

    /// After a complete response: the hop it redirects to, or nil when it
    /// is the answer. Throws for a redirect not followed: past the limit, or
    /// to anything but http(s).
    package func next() throws -> CurlHop? {
        // Redacted only where it is shown: every transfer ends here, on the
        // network thread, and redacting a URL there cost more than the rest
        // of a probe's completion (a listing's 10,000 HEADs: 0.3 s).
        var asked: String { MediaError.redacted(request.url) }
        if isDigestChallenge, let origin = HTTPOrigin(url: url) {
            Log.debug("\(asked): HTTP 401 asks for Digest, answered")
            Self.digestOrigins.withLock { _ = $0.insert(origin) }
            return try CurlHop(url: url, redirects: redirects, request: request, options: options, digest: true)
        }
        guard isRedirect, let target = location else { return nil }
        guard redirects < Self.maxRedirects else {
            throw MediaError.io("\(asked): more than \(Self.maxRedirects) redirects")
        }
        guard let parsed = MediaURL(target), parsed.isHTTP, HTTPOrigin(parsed) != nil else {
            throw MediaError.io("\(asked): redirect to '\(MediaError.redacted(target))' refused (only http and https)")
        }
        Log.debug("\(asked): HTTP \(status), on to \(MediaError.redacted(target))")
        return try CurlHop(url: Self.credentialed(parsed, first: request.url), redirects: redirects + 1,
                           request: request, options: options, digest: false)
    }

    /// `user:pass@` of the first URL belongs to its origin: a hop back there
    /// carries it (a handle following the redirect would have kept it), a
    /// hop anywhere else carries none. Both origins are libcurl's reading
    /// of the URLs, and the credentials are set through it.
    package static func credentialed(_ target: MediaURL, first: String) -> String {
        let bare = target.withoutCredentials
        guard let first = MediaURL(first), first.user != nil || first.password != nil,
              let origin = HTTPOrigin(bare), origin == HTTPOrigin(first) else { return bare.text }
        return bare.withCredentials(user: first.user, password: first.password)?.text ?? bare.text
    }
}
