// `--metrics ADDR:PORT`: the mount's one HTTP listener, on libmicrohttpd
// (decision 0043): `GET /` the status page, `/status.json` what it draws,
// `/metrics` the Prometheus text. Read-only: GET and HEAD, nothing else.
// The socket is bound here, before mounting (a bad or busy address fails
// the command, nothing mounted); libmicrohttpd's one internal thread starts
// in the daemon (spawned, never forked: decision 0024) and is stopped,
// with every connection it holds, before the FUSE session ends.
#if canImport(Glibc)
import Glibc
import CMicroHTTPD
import MediaSupport
#endif

public final class AdminListener: Sendable {
    /// Connections at once, and from one address: a page, a scraper and a
    /// few tabs, not a crowd.
    static let connectionLimit: UInt32 = 32
    static let connectionsPerAddress: UInt32 = 16
    /// A connection idle this long is closed (a client that never sends
    /// its request holds nothing for long).
    static let idleSeconds: UInt32 = 5
    /// Memory per connection, its request head included: a larger head is
    /// refused by libmicrohttpd.
    static let connectionMemory = 16 << 10

    public let address: MetricsAddress
    private let exposition: MetricsExposition
    /// The bound socket, owned by libmicrohttpd once it starts (it closes it
    /// at stop); closed here if it never started.
    private let listener: Int32
    /// The daemon and the catalog it serves: set by `start`, cleared by
    /// `stop` (the mount's main thread); the catalog read at each request.
    private struct Serving {
        /// libmicrohttpd's daemon, as its address (a pointer is not Sendable).
        var daemon: UInt?
        var catalog: Catalog?
        var started = false
        /// libmicrohttpd took the socket (and closes it at stop).
        var handedOver = false
    }
    private let serving = Locked(Serving())

    /// `bind(2)` of a socket address of either family.
    private static func bind<Address>(_ fd: Int32, to address: inout Address) -> Int32 {
        withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(fd, $0, socklen_t(MemoryLayout<Address>.size))
            }
        }
    }

    /// Binds and listens on `address`; throws naming it when that fails.
    public init(address: MetricsAddress, exposition: MetricsExposition) throws {
        self.address = address
        self.exposition = exposition
        let domain = address.family == .ipv6 ? AF_INET6 : AF_INET
        let fd = socket(domain, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw MediaError.system("--metrics \(address): cannot make a socket") }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let bound: Int32
        switch address.family {
        case .ipv4:
            var sa = sockaddr_in()
            sa.sin_family = sa_family_t(AF_INET)
            sa.sin_port = address.port.bigEndian
            _ = inet_pton(AF_INET, address.host, &sa.sin_addr)
            bound = Self.bind(fd, to: &sa)
        case .ipv6:
            var sa = sockaddr_in6()
            sa.sin6_family = sa_family_t(AF_INET6)
            sa.sin6_port = address.port.bigEndian
            _ = inet_pton(AF_INET6, address.host, &sa.sin6_addr)
            bound = Self.bind(fd, to: &sa)
        }
        guard bound == 0, listen(fd, 16) == 0 else {
            let error = MediaError.system("--metrics \(address): cannot listen")
            close(fd)
            throw error
        }
        listener = fd
    }

    deinit {
        // libmicrohttpd closed it at stop; one that never started is ours.
        if !serving.withLock({ $0.handedOver }) { close(listener) }
    }

    /// Starts serving `catalog`: libmicrohttpd's thread, on the bound socket.
    public func start(serving catalog: Catalog) {
        let fresh = serving.withLock { serving -> Bool in
            guard !serving.started else { return false }
            serving.started = true
            serving.catalog = catalog
            return true
        }
        guard fresh else { return }
        // Unretained: `stop` ends the daemon before this object can go.
        let context = Unmanaged.passUnretained(self).toOpaque()
        let daemon = mediafs_mhd_start(listener, Self.connectionLimit, Self.connectionsPerAddress, Self.idleSeconds,
                                       Self.connectionMemory, { cls, connection, url, method, _, _, _, _ in
            guard let cls, let connection, let url, let method else { return mediafs_mhd_no() }
            let listener = Unmanaged<AdminListener>.fromOpaque(cls).takeUnretainedValue()
            return listener.respond(on: connection, method: String(cString: method), path: String(cString: url))
        }, context)
        guard let daemon else {
            Log.error("--metrics \(address): libmicrohttpd did not start; no status page or metrics")
            return
        }
        serving.withLock { $0.daemon = UInt(bitPattern: daemon); $0.handedOver = true }
        Log.info("status page at http://\(address)/, metrics at http://\(address)/metrics")
    }

    /// Ends libmicrohttpd's thread and every connection, and closes the
    /// socket. Safe to call twice.
    public func stop() {
        let daemon = serving.withLock { serving -> UInt? in
            defer { serving.daemon = nil; serving.catalog = nil }
            return serving.daemon
        }
        if let daemon, let pointer = OpaquePointer(bitPattern: daemon) { MHD_stop_daemon(pointer) }
    }

    /// One answer: status, type and body.
    struct Answer: Equatable {
        var status: UInt32
        var contentType: String
        var body: [UInt8]
        /// Sent as `Allow` with a 405.
        var allow: String?
    }

    /// The answer to `method` on `path` (the query already gone).
    static func answer(method: String, path: String, catalog: Catalog?, exposition: MetricsExposition) -> Answer {
        let plain = "text/plain; charset=utf-8"
        guard method == "GET" || method == "HEAD" else {
            return Answer(status: 405, contentType: plain, body: Array("GET or HEAD only\n".utf8), allow: "GET, HEAD")
        }
        guard let catalog else { return Answer(status: 503, contentType: plain, body: Array("stopping\n".utf8)) }
        switch path {
        case "/":
            return Answer(status: 200, contentType: "text/html; charset=utf-8", body: Array(StatusPage.html.utf8))
        case "/status.json":
            return Answer(status: 200, contentType: "application/json",
                          body: Array(StatusDocument.json(for: catalog).utf8))
        case "/metrics":
            return Answer(status: 200, contentType: MetricsExposition.contentType,
                          body: Array(exposition.text(for: catalog).utf8))
        default:
            return Answer(status: 404, contentType: plain, body: Array("see /, /status.json or /metrics\n".utf8))
        }
    }

    /// Queues the answer on libmicrohttpd's connection (it copies the body;
    /// it leaves a HEAD's out itself).
    private func respond(on connection: OpaquePointer, method: String, path: String) -> MHD_Result {
        let answer = Self.answer(method: method, path: path, catalog: serving.withLock { $0.catalog },
                                 exposition: exposition)
        var body = answer.body
        let response = body.withUnsafeMutableBytes {
            MHD_create_response_from_buffer($0.count, $0.baseAddress, mediafs_mhd_must_copy())
        }
        guard let response else { return mediafs_mhd_no() }
        defer { MHD_destroy_response(response) }
        var headers = [("Content-Type", answer.contentType), ("Cache-Control", "no-store"),
                       ("X-Content-Type-Options", "nosniff")]
        // The page needs nothing from elsewhere and may fetch only from here.
        if path == "/" {
            headers.append(("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; "
                            + "style-src 'unsafe-inline'; connect-src 'self'; img-src data:"))
        }
        if let allow = answer.allow { headers.append(("Allow", allow)) }
        for (name, value) in headers { _ = MHD_add_response_header(response, name, value) }
        return MHD_queue_response(connection, answer.status, response)
    }
}
