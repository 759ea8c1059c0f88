// One SSH session with its SFTP channel, through libssh2, for what
// libcurl's sftp:// cannot give: a directory's entries with their
// attributes (size, mtime, type) from one listing (libcurl writes `ls -l`
// text, dated to the minute in the server's time zone), and a file's
// attributes. Blocking, on the caller's thread (the listings worker, the
// command line before mounting), every wait bounded by the timeout.
// The host key is verified against known_hosts before anything is sent
// (SSHHostKey names the refusal); then the agent, the keys, and a password
// from the URL or ~/.netrc are tried, as ssh tries them. File bytes are
// read on it too (SFTPSession+Reads, for SFTPFetcher), on handles kept
// open between reads (SFTPOpenFiles).
import CSSH2
import Foundation
import MediaSupport
#if canImport(Glibc)
import Glibc
#endif

/// Unchecked: one caller uses a session at a time (SFTPSessions hands it
/// out and takes it back under its lock); libssh2's session is not shared.
package final class SFTPSession: @unchecked Sendable {
    /// A directory's entry or a file's attributes, as the server gave them.
    package struct Entry: Sendable, Equatable {
        package var name: String
        package var isDirectory: Bool
        package var isRegular: Bool
        package var isLink: Bool
        package var size: Int64?
        /// Seconds since the epoch.
        package var mtime: Int64?
    }

    /// Entries one listing takes at most.
    package static let maxEntries = 1_000_000

    package let host: String
    package let port: Int
    package let user: String
    private let origin: HTTPOrigin
    private var socket: Int32 = -1
    /// The libssh2 session and its SFTP channel; SFTPSession+Reads uses them.
    private(set) var session: OpaquePointer?
    private(set) var sftp: OpaquePointer?
    /// Files opened for reads, kept open between them.
    var openFiles = SFTPOpenFiles()
    /// A file was opened for reads on it once: libssh2 may be owed answers
    /// on its channel from then on (SFTPSession+Listing).
    var hasOpenedFiles = false
    /// How far streaming reads ask ahead (SFTPSession+Reads), and the
    /// link's round trip as the last open measured it.
    var readAhead = SFTPReadAhead()
    var roundTrip: Double?
    /// A transport failure (a timeout, a dropped connection) happened: the
    /// session is closed, never kept (SFTPSessions), and nothing more is
    /// sent on it, not even the close of its handles.
    package internal(set) var broken = false
    /// The read timeout in seconds, for the log line that names it.
    let timeout: Int

    /// Connects to the URL's host, verifies its key, logs in and opens SFTP;
    /// throws a MediaError naming the host and what failed.
    package init(url: String, options: HTTPOptions, timeout: Int) throws {
        guard let parsed = MediaURL(url), parsed.scheme == "sftp", let origin = HTTPOrigin(parsed) else {
            throw MediaError(EINVAL, "'\(MediaError.redacted(url))' is not an sftp:// URL")
        }
        self.origin = origin
        self.timeout = timeout
        host = parsed.host.hasPrefix("[") ? String(parsed.host.dropFirst().dropLast()) : parsed.host
        port = origin.port
        user = parsed.user.flatMap { $0.removingPercentEncoding } ?? options.ssh.defaultUser
        Self.libraryReady
        do {
            try connect(timeout: timeout)
            guard let session = mediafs_ssh_session_init() else { throw failure(EIO, "cannot start an SSH session") }
            self.session = session
            libssh2_session_set_blocking(session, 1)
            libssh2_session_set_timeout(session, timeout * 1000)
            preferKnownHostKeyTypes(session, knownHosts: options.ssh.knownHosts)
            guard libssh2_session_handshake(session, socket) == 0 else { throw failure(EIO, "SSH handshake failed") }
            try verifyHostKey(knownHosts: options.ssh.knownHosts)
            try authenticate(url: parsed, options: options)
            guard let sftp = libssh2_sftp_init(session) else { throw failure(EIO, "the server starts no SFTP subsystem") }
            self.sftp = sftp
        } catch {
            close()
            throw error
        }
    }

    deinit { close() }

    private static let libraryReady: Void = { libssh2_init(0) }()

    var name: String { port == 22 ? host : "[\(host)]:\(port)" }

    func failure(_ errno: Int32, _ what: String) -> MediaError {
        var detail = ""
        if let session {
            var message: UnsafeMutablePointer<CChar>?
            var length: Int32 = 0
            if libssh2_session_last_error(session, &message, &length, 0) != 0, let message {
                detail = ": " + String(cString: message)
            }
        }
        return MediaError(errno, "sftp \(name): \(what)\(detail)")
    }

    private func connect(timeout: Int) throws {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &list) == 0, let first = list else {
            throw MediaError(EHOSTUNREACH, "sftp \(name): cannot resolve the host")
        }
        defer { freeaddrinfo(list) }
        var wait = timeval(tv_sec: timeout, tv_usec: 0)
        var address: UnsafeMutablePointer<addrinfo>? = first
        while let current = address {
            let fd = Glibc.socket(current.pointee.ai_family, current.pointee.ai_socktype, current.pointee.ai_protocol)
            if fd >= 0 {
                // Bounds the connect and every blocking read and write.
                setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
                if Glibc.connect(fd, current.pointee.ai_addr, current.pointee.ai_addrlen) == 0 {
                    socket = fd
                    return
                }
                Glibc.close(fd)
            }
            address = current.pointee.ai_next
        }
        throw MediaError(EHOSTUNREACH, "sftp \(name): cannot connect (\(String(cString: strerror(errno))))")
    }

    /// Asks the server for a key of a type known_hosts has for it
    /// (KnownHostTypes); libssh2's own order when it has none.
    private func preferKnownHostKeyTypes(_ session: OpaquePointer, knownHosts: String) {
        let known = KnownHostTypes.types(for: host, port: port, inFile: knownHosts)
        guard !known.isEmpty else { return }
        var list: UnsafeMutablePointer<UnsafePointer<CChar>?>?
        let count = libssh2_session_supported_algs(session, LIBSSH2_METHOD_HOSTKEY, &list)
        guard count > 0, let list else { return }
        defer { libssh2_free(session, list) }
        let supported = (0..<Int(count)).compactMap { list[$0].map { String(cString: $0) } }
        guard let preference = KnownHostTypes.preference(known: known, supported: supported) else { return }
        if libssh2_session_method_pref(session, LIBSSH2_METHOD_HOSTKEY, preference) != 0 {
            Log.debug("sftp \(name): libssh2 took no host key preference '\(preference)'")
        }
    }

    private func verifyHostKey(knownHosts: String) throws {
        guard let session else { return }
        var length = 0
        var type: Int32 = 0
        guard let key = libssh2_session_hostkey(session, &length, &type),
              let hash = libssh2_hostkey_hash(session, LIBSSH2_HOSTKEY_HASH_SHA256) else {
            throw failure(EIO, "the server shows no host key")
        }
        let digest = UnsafeRawBufferPointer(start: hash, count: 32).map { $0 }
        let hostKey = SSHHostKey(type: Self.typeName(type), sha256: digest)
        guard let hosts = libssh2_knownhost_init(session) else { throw failure(EIO, "cannot read known hosts") }
        defer { libssh2_knownhost_free(hosts) }
        // A missing file knows no host: every key is unknown, and refused.
        _ = libssh2_knownhost_readfile(hosts, knownHosts, LIBSSH2_KNOWNHOST_FILE_OPENSSH)
        let mask = LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_RAW | Self.knownHostKeyBits(type)
        let check = libssh2_knownhost_checkp(hosts, host, Int32(port), key, length, mask, nil)
        switch check {
        case LIBSSH2_KNOWNHOST_CHECK_MATCH:
            SSHHostKey.noteVerified(hostKey, for: origin)
        case LIBSSH2_KNOWNHOST_CHECK_MISMATCH:
            throw hostKey.refusal(.mismatch, host: host, port: port, knownHosts: knownHosts)
        default:
            throw hostKey.refusal(.unknown, host: host, port: port, knownHosts: knownHosts)
        }
    }

    static func typeName(_ type: Int32) -> String {
        switch type {
        case LIBSSH2_HOSTKEY_TYPE_RSA: return "RSA"
        case LIBSSH2_HOSTKEY_TYPE_DSS: return "DSA"
        case LIBSSH2_HOSTKEY_TYPE_ECDSA_256, LIBSSH2_HOSTKEY_TYPE_ECDSA_384, LIBSSH2_HOSTKEY_TYPE_ECDSA_521: return "ECDSA"
        case LIBSSH2_HOSTKEY_TYPE_ED25519: return "ED25519"
        default: return "unknown-type"
        }
    }

    static func knownHostKeyBits(_ type: Int32) -> Int32 {
        switch type {
        case LIBSSH2_HOSTKEY_TYPE_RSA: return LIBSSH2_KNOWNHOST_KEY_SSHRSA
        case LIBSSH2_HOSTKEY_TYPE_DSS: return LIBSSH2_KNOWNHOST_KEY_SSHDSS
        case LIBSSH2_HOSTKEY_TYPE_ECDSA_256: return LIBSSH2_KNOWNHOST_KEY_ECDSA_256
        case LIBSSH2_HOSTKEY_TYPE_ECDSA_384: return LIBSSH2_KNOWNHOST_KEY_ECDSA_384
        case LIBSSH2_HOSTKEY_TYPE_ECDSA_521: return LIBSSH2_KNOWNHOST_KEY_ECDSA_521
        case LIBSSH2_HOSTKEY_TYPE_ED25519: return LIBSSH2_KNOWNHOST_KEY_ED25519
        default: return LIBSSH2_KNOWNHOST_KEY_UNKNOWN
        }
    }

    /// The agent's keys, then the key files, then a password (the URL's,
    /// else ~/.netrc's with --netrc), as far as the server allows each.
    private func authenticate(url: MediaURL, options: HTTPOptions) throws {
        guard let session else { return }
        var tried: [String] = []
        if options.ssh.agent, authenticateWithAgent(session) { return }
        if options.ssh.agent { tried.append("the agent's keys") }
        for key in options.ssh.identities {
            if mediafs_ssh_publickey_file(session, user, key) == 0 { return }
            tried.append("key \(key)")
        }
        var password = url.password.flatMap { $0.removingPercentEncoding }
        var from = "the URL's password"
        if password == nil, options.netrc,
           let entry = Netrc.load()?.credentials(host: host, user: user) {
            password = entry.password
            from = "the password from ~/.netrc"
        }
        if let password {
            if mediafs_ssh_password(session, user, password) == 0 { return }
            tried.append(from)
        }
        // A connection lost or garbled during the login (the server
        // killed, a timeout) is no refusal: the caller may try again.
        // libssh2 names some such losses a refusal: a publickey login whose
        // answer never came is PUBLICKEY_UNVERIFIED, "Waiting for USERAUTH
        // response" (a stress run killed the server's process for a login
        // in flight, and the read failed EACCES). A server that refuses
        // keeps the connection open for the next method; one that ended
        // it did not answer.
        if Self.lostDuringLogin.contains(libssh2_session_last_errno(session)) || peerClosed() {
            throw failure(EIO, "connection lost during the login (the server closed it without an answer, or "
                          + "after too many refused tries)")
        }
        let list = tried.isEmpty ? "nothing to offer: no agent, no key in ~/.ssh, no password"
            : "tried " + tried.joined(separator: ", ")
        throw failure(EACCES, "login as '\(user)' refused (\(list))")
    }

    /// Whether the server closed the connection (end of file or reset,
    /// without waiting): what a refusal does not do.
    private func peerClosed() -> Bool {
        guard socket >= 0 else { return true }
        var byte: UInt8 = 0
        let n = recv(socket, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
    }

    /// libssh2's failures that say the connection, not the server's
    /// answer, ended a login.
    static let lostDuringLogin: Set<Int32> = [
        LIBSSH2_ERROR_SOCKET_NONE, LIBSSH2_ERROR_BANNER_RECV, LIBSSH2_ERROR_BANNER_SEND, LIBSSH2_ERROR_INVALID_MAC,
        LIBSSH2_ERROR_KEX_FAILURE, LIBSSH2_ERROR_SOCKET_SEND, LIBSSH2_ERROR_KEY_EXCHANGE_FAILURE,
        LIBSSH2_ERROR_TIMEOUT, LIBSSH2_ERROR_DECRYPT, LIBSSH2_ERROR_SOCKET_DISCONNECT, LIBSSH2_ERROR_PROTO,
        LIBSSH2_ERROR_SOCKET_TIMEOUT, LIBSSH2_ERROR_EAGAIN, LIBSSH2_ERROR_SOCKET_RECV, LIBSSH2_ERROR_ENCRYPT,
        LIBSSH2_ERROR_BAD_SOCKET,
    ]

    private func authenticateWithAgent(_ session: OpaquePointer) -> Bool {
        guard let agent = libssh2_agent_init(session) else { return false }
        defer { libssh2_agent_disconnect(agent); libssh2_agent_free(agent) }
        guard libssh2_agent_connect(agent) == 0, libssh2_agent_list_identities(agent) == 0 else { return false }
        var previous: UnsafeMutablePointer<libssh2_agent_publickey>?
        var identity: UnsafeMutablePointer<libssh2_agent_publickey>?
        while libssh2_agent_get_identity(agent, &identity, previous) == 0, let current = identity {
            if libssh2_agent_userauth(agent, user, current) == 0 { return true }
            previous = current
        }
        return false
    }

    /// The path libssh2 is given for a URL's (percent-encoded) path: a
    /// leading `/~/` is the login's home, as curl reads it.
    package static func remotePath(_ urlPath: String) -> String {
        let decoded = urlPath.removingPercentEncoding ?? urlPath
        if decoded == "/~" || decoded == "/~/" { return "." }
        if decoded.hasPrefix("/~/") { return String(decoded.dropFirst(3)) }
        return decoded.isEmpty ? "/" : decoded
    }

    /// The entries of the directory at `path` (`.` and `..` left out), one
    /// listing, its READDIRs pipelined where the session allows
    /// (SFTPSession+Listing); a symbolic link is followed with one stat of
    /// its own.
    package func list(path: String) throws -> [Entry] {
        guard let sftp else { throw failure(EIO, "no SFTP channel") }
        var entries: [Entry] = []
        func add(_ bytes: [UInt8], _ attributes: LIBSSH2_SFTP_ATTRIBUTES) throws {
            let entryName = String(decoding: bytes, as: UTF8.self)
            if entryName == "." || entryName == ".." || entryName.contains("/") || entryName.isEmpty { return }
            guard entries.count < Self.maxEntries else {
                throw MediaError(EFBIG, "sftp \(name): directory '\(path)' has more than \(Self.maxEntries) entries")
            }
            var entry = Self.entry(name: entryName, attributes)
            if entry.isLink, let target = try? stat(path: (path.hasSuffix("/") ? path : path + "/") + entryName) {
                entry = Entry(name: entryName, isDirectory: target.isDirectory, isRegular: target.isRegular, isLink: true,
                              size: target.size, mtime: target.mtime)
            }
            entries.append(entry)
        }
        if let listed = try listPipelined(path: path) {
            for (entryName, attributes) in listed { try add(entryName, Self.attributes(attributes)) }
            return entries
        }
        guard let handle = mediafs_sftp_opendir(sftp, path) else { throw sftpFailure("cannot open directory '\(path)'") }
        // A close that fails may leave its answer owed on the channel.
        defer { if libssh2_sftp_close_handle(handle) != 0 { broken = true } }
        var buffer = [CChar](repeating: 0, count: 4096)
        while true {
            var attributes = LIBSSH2_SFTP_ATTRIBUTES()
            let count = libssh2_sftp_readdir_ex(handle, &buffer, buffer.count, nil, 0, &attributes)
            if count == 0 { break }
            guard count > 0 else { throw sftpFailure("reading directory '\(path)' failed") }
            try add(buffer[..<Int(count)].map { UInt8(bitPattern: $0) }, attributes)
        }
        return entries
    }

    /// libssh2's attributes of what the pipelined listing read.
    static func attributes(_ read: SFTPWire.Attributes) -> LIBSSH2_SFTP_ATTRIBUTES {
        var attributes = LIBSSH2_SFTP_ATTRIBUTES()
        if let size = read.size {
            attributes.flags |= UInt(LIBSSH2_SFTP_ATTR_SIZE)
            attributes.filesize = size
        }
        if let permissions = read.permissions {
            attributes.flags |= UInt(LIBSSH2_SFTP_ATTR_PERMISSIONS)
            attributes.permissions = UInt(permissions)
        }
        if let mtime = read.mtime {
            attributes.flags |= UInt(LIBSSH2_SFTP_ATTR_ACMODTIME)
            attributes.mtime = UInt(mtime)
        }
        return attributes
    }

    /// The attributes of `path`, links followed.
    package func stat(path: String) throws -> Entry {
        guard let sftp else { throw failure(EIO, "no SFTP channel") }
        var attributes = LIBSSH2_SFTP_ATTRIBUTES()
        guard mediafs_sftp_stat(sftp, path, &attributes) == 0 else { throw sftpFailure("cannot stat '\(path)'") }
        return Self.entry(name: String(path.split(separator: "/").last ?? ""), attributes)
    }

    static func entry(name: String, _ attributes: LIBSSH2_SFTP_ATTRIBUTES) -> Entry {
        let hasType = attributes.flags & UInt(LIBSSH2_SFTP_ATTR_PERMISSIONS) != 0
        let type = attributes.permissions & mediafs_sftp_type_mask()
        let size = attributes.flags & UInt(LIBSSH2_SFTP_ATTR_SIZE) != 0 && attributes.filesize <= UInt64(Limits.maxLength)
            ? Int64(attributes.filesize) : nil
        // SFTP v3 sends 32 bits; a wider value from elsewhere is no date.
        let mtime = attributes.flags & UInt(LIBSSH2_SFTP_ATTR_ACMODTIME) != 0 ? Int64(exactly: attributes.mtime) : nil
        return Entry(name: name, isDirectory: hasType && type == mediafs_sftp_type_dir(),
                     isRegular: hasType && type == mediafs_sftp_type_regular(),
                     isLink: hasType && type == mediafs_sftp_type_link(), size: size, mtime: mtime)
    }

    /// What the server's SFTP status says, as an errno and a sentence.
    func sftpFailure(_ what: String) -> MediaError {
        guard let session, let sftp, libssh2_session_last_errno(session) == LIBSSH2_ERROR_SFTP_PROTOCOL else {
            broken = true
            if let session, libssh2_session_last_errno(session) == LIBSSH2_ERROR_TIMEOUT {
                return MediaError(EIO, "sftp \(name): \(what): no answer in \(timeout) s (--timeout)")
            }
            return failure(EIO, what)
        }
        return statusFailure(UInt32(truncatingIfNeeded: libssh2_sftp_last_error(sftp)), what)
    }

    /// An SFTP STATUS code (libssh2's last, or one the pipelined listing
    /// read) as an errno and a sentence; `detail`, the server's words.
    func statusFailure(_ code: UInt32, _ what: String, detail: String = "") -> MediaError {
        switch UInt(code) {
        case UInt(LIBSSH2_FX_NO_SUCH_FILE), UInt(LIBSSH2_FX_NO_SUCH_PATH):
            return MediaError(ENOENT, "sftp \(name): \(what): no such file")
        case UInt(LIBSSH2_FX_PERMISSION_DENIED):
            return MediaError(EACCES, "sftp \(name): \(what): permission denied")
        default:
            return MediaError(EIO, "sftp \(name): \(what): SFTP status \(code)" + (detail.isEmpty ? "" : " \(detail)"))
        }
    }

    private func close() {
        // A broken session's handles are left to the server, which closes
        // them with the connection; waiting on a dead one would only time out.
        if !broken { openFiles.closeAll() } else { openFiles.forgetAll() }
        if let sftp { libssh2_sftp_shutdown(sftp) }
        sftp = nil
        if let session {
            _ = mediafs_ssh_disconnect(session)
            libssh2_session_free(session)
        }
        session = nil
        if socket >= 0 { Glibc.close(socket) }
        socket = -1
    }
}
