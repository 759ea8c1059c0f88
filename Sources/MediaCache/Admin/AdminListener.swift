// `--metrics ADDR:PORT` (and `--rc`): the mount's HTTP listener, on
// libmicrohttpd (decision 0043): `GET /` the status page, `/status.json`
// what it draws, `/metrics` the Prometheus text; with a RemoteControl,
// rclone's remote-control commands as POSTs (decision 0048), behind its
// authentication. Nothing else: GET and HEAD, and POST of a command.
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
    /// rclone's remote control, when `--rc` names this address.
    private let remoteControl: RemoteControl?
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
    public init(address: MetricsAddress, exposition: MetricsExposition, remoteControl: RemoteControl? = nil) throws {
        self.address = address
        self.exposition = exposition
        self.remoteControl = remoteControl
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
                                       Self.connectionMemory, { cls, connection, url, method, _, upload, uploadSize, state in
            guard let cls, let connection, let url, let method, let state else { return mediafs_mhd_no() }
            let listener = Unmanaged<AdminListener>.fromOpaque(cls).takeUnretainedValue()
            let verb = String(cString: method)
            // A POST's body comes in calls after its head: gathered, bounded,
            // answered at the call with none left.
            if verb == "POST" {
                guard let pointer = state.pointee else {
                    state.pointee = Unmanaged.passRetained(RequestBody()).toOpaque()
                    return mediafs_mhd_yes()
                }
                let body = Unmanaged<RequestBody>.fromOpaque(pointer).takeUnretainedValue()
                if let uploadSize, uploadSize.pointee > 0 {
                    if let upload { body.append(UnsafeRawBufferPointer(start: upload, count: uploadSize.pointee)) }
                    uploadSize.pointee = 0
                    return mediafs_mhd_yes()
                }
                return listener.respond(on: connection, method: verb, path: String(cString: url), body: body)
            }
            return listener.respond(on: connection, method: verb, path: String(cString: url), body: nil)
        }, { _, _, state, _ in
            // A request ended (answered or cut): its body goes.
            if let state, let pointer = state.pointee {
                Unmanaged<RequestBody>.fromOpaque(pointer).release()
                state.pointee = nil
            }
        }, context)
        guard let daemon else {
            Log.error("--metrics \(address): libmicrohttpd did not start; no status page or metrics")
            return
        }
        serving.withLock { $0.daemon = UInt(bitPattern: daemon); $0.handedOver = true }
        Log.info("status page at http://\(address)/, metrics at http://\(address)/metrics"
                 + (remoteControl == nil ? "" : ", rclone's remote control at http://\(address)/"))
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
        /// A 401 that asks for Basic credentials.
        var challenge = false
    }

    /// The answer to `method` on `path` (the query already gone).
    static func answer(method: String, path: String, catalog: Catalog?, exposition: MetricsExposition,
                       commands: Bool = false) -> Answer {
        let plain = "text/plain; charset=utf-8"
        guard method == "GET" || method == "HEAD" else {
            let allow = commands ? "GET, HEAD, POST" : "GET, HEAD"
            return Answer(status: 405, contentType: plain, body: Array("\(allow) only\n".utf8), allow: allow)
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

    /// A POST's body as it arrives, up to `RemoteControl.maxBody`.
    final class RequestBody {
        var bytes: [UInt8] = []
        var tooLarge = false

        func append(_ data: UnsafeRawBufferPointer) {
            guard !tooLarge else { return }
            guard bytes.count + data.count <= RemoteControl.maxBody else {
                tooLarge = true
                bytes = []
                return
            }
            bytes.append(contentsOf: data)
        }
    }

    /// The answer to a POST: a remote-control command, behind its authentication.
    private func commandAnswer(on connection: OpaquePointer, path: String, body: RequestBody) -> Answer {
        let plain = "text/plain; charset=utf-8"
        guard let remoteControl else {
            return Answer(status: 405, contentType: plain, body: Array("GET or HEAD only\n".utf8), allow: "GET, HEAD")
        }
        let authorization = mediafs_mhd_header(connection, "Authorization").map { String(cString: $0) }
        guard remoteControl.auth.admits(authorization: authorization) else {
            var answer = Answer(status: 401, contentType: plain, body: Array("authentication required\n".utf8))
            answer.challenge = true
            return answer
        }
        let command = String(path.drop(while: { $0 == "/" }))
        let json: (status: UInt32, json: [String: Any])
        if body.tooLarge {
            json = (413, ["error": "the body is over \(RemoteControl.maxBody) bytes", "path": command, "status": 413])
        } else if let catalog = serving.withLock({ $0.catalog }) {
            var query: [(String, String)] = []
            var buffer = [CChar](repeating: 0, count: 16 << 10)
            let length = mediafs_mhd_arguments(connection, &buffer, buffer.count)
            if length > 0 {
                let fields = buffer[..<Int(length)].split(separator: 0, omittingEmptySubsequences: false)
                    .map { String(decoding: $0.map { UInt8(bitPattern: $0) }, as: UTF8.self) }
                for index in stride(from: 0, to: fields.count - 1, by: 2) { query.append((fields[index], fields[index + 1])) }
            }
            let contentType = mediafs_mhd_header(connection, "Content-Type").map { String(cString: $0) }
            do {
                let parameters = try RemoteControl.parameters(query: query, body: body.bytes, contentType: contentType)
                json = remoteControl.answer(command: command, parameters: parameters, catalog: catalog)
                Log.info("remote control: \(command) answered \(json.status)")
            } catch let failure as RemoteControl.Failure {
                json = (failure.status, ["error": failure.message, "path": command, "status": Int(failure.status)])
            } catch {
                json = (400, ["error": "\(error)", "path": command, "status": 400])
            }
        } else {
            json = (503, ["error": "the mount is stopping", "path": command, "status": 503])
        }
        return Answer(status: json.status, contentType: "application/json", body: RemoteControl.encoded(json.json))
    }

    /// Queues the answer on libmicrohttpd's connection (it copies the body;
    /// it leaves a HEAD's out itself).
    private func respond(on connection: OpaquePointer, method: String, path: String, body: RequestBody?) -> MHD_Result {
        let answer = body.map { commandAnswer(on: connection, path: path, body: $0) }
            ?? Self.answer(method: method, path: path, catalog: serving.withLock { $0.catalog }, exposition: exposition,
                           commands: remoteControl != nil)
        var bytes = answer.body
        let response = bytes.withUnsafeMutableBytes {
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
        if answer.challenge { headers.append(("WWW-Authenticate", "Basic realm=\"mediafs\"")) }
        for (name, value) in headers { _ = MHD_add_response_header(response, name, value) }
        return MHD_queue_response(connection, answer.status, response)
    }
}
