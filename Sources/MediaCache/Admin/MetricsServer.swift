// `--metrics`: one small plain HTTP/1.1 responder on its own long-lived
// thread, answering `GET /metrics` with MetricsExposition's text. The socket
// is bound before mounting (a bad or busy address fails the command, nothing
// mounted); the thread starts in the daemon (spawned, never forked: decision 0024) and is stopped
// and joined before the FUSE session ends. One connection at a time, each
// bounded in size and time, and every answer closes it.
#if canImport(Glibc)
import Glibc
import MediaSupport
#endif

public final class MetricsServer: Sendable {
    /// A request's head larger than this is refused.
    static let maxRequestBytes = 8 << 10
    /// How long one connection may take to send its request and read the answer.
    static let connectionSeconds = 5.0

    public let address: MetricsAddress
    private let exposition: MetricsExposition
    private let listener: Int32
    /// A pipe: `stop()` writes to it to wake the thread out of poll.
    private let wake: (read: Int32, write: Int32)
    /// The responder thread and the catalog it serves: set by `start`,
    /// cleared by `stop` (the mount's main thread), the catalog read by the
    /// responder at each scrape.
    private struct Serving {
        var thread: pthread_t?
        var catalog: Catalog?
    }
    private let serving = Locked(Serving())
    /// The mount's clock: each connection's time limit is on it.
    private let clock: Clock

    /// Binds and listens on `address`; throws naming it when that fails.
    /// `bind(2)` of a socket address of either family.
    private static func bind<Address>(_ fd: Int32, to address: inout Address) -> Int32 {
        withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(fd, $0, socklen_t(MemoryLayout<Address>.size))
            }
        }
    }

    public init(address: MetricsAddress, exposition: MetricsExposition, clock: Clock) throws {
        self.clock = clock
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
        var pipeFDs: [Int32] = [-1, -1]
        guard pipe(&pipeFDs) == 0 else {
            let error = MediaError.system("--metrics \(address): cannot make a pipe")
            close(fd)
            throw error
        }
        for end in pipeFDs { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        listener = fd
        wake = (pipeFDs[0], pipeFDs[1])
    }

    deinit {
        close(listener)
        close(wake.read)
        close(wake.write)
    }

    /// Starts the responder thread, serving `catalog`'s counters.
    public func start(serving catalog: Catalog) {
        let started = serving.withLock { serving -> Bool in
            guard serving.thread == nil else { return false }
            serving.catalog = catalog
            return true
        }
        guard started else { return }
        var tid = pthread_t()
        let context = Unmanaged.passRetained(self).toOpaque()
        pthread_create(&tid, nil, { arg in
            let server = Unmanaged<MetricsServer>.fromOpaque(arg!).takeRetainedValue()
            server.run()
            return nil
        }, context)
        serving.withLock { $0.thread = tid }
        Log.info("metrics at http://\(address)/metrics")
    }

    /// Wakes the thread, lets it finish the connection it serves (bounded
    /// by `connectionSeconds`), and joins it. Safe to call twice.
    public func stop() {
        guard let thread = serving.withLock({ $0.thread }) else { return }
        var byte: UInt8 = 1
        _ = write(wake.write, &byte, 1)
        pthread_join(thread, nil)
        serving.withLock { $0 = Serving() }
    }

    private func run() {
        while true {
            var fds = [pollfd(fd: listener, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
            let ready = poll(&fds, 2, -1)
            if ready < 0 && errno == EINTR { continue }
            if ready < 0 || fds[1].revents != 0 { return }
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { continue }
            // After accept, as Glibc's module lacks accept4: a fusermount3
            // exec'd in between would only hold one scrape's connection.
            _ = fcntl(connection, F_SETFD, FD_CLOEXEC)
            _ = fcntl(connection, F_SETFL, fcntl(connection, F_GETFL) | O_NONBLOCK)
            serve(connection)
            close(connection)
        }
    }

    private func serve(_ connection: Int32) {
        let deadline = clock.monotonic() + Self.connectionSeconds
        guard let head = readHead(connection, deadline: deadline) else { return }
        let (status, body) = answer(to: head)
        let method = head.split(separator: " ", maxSplits: 1).first ?? ""
        var response = "HTTP/1.1 \(status)\r\nContent-Type: "
            + (status.hasPrefix("200") ? MetricsExposition.contentType : "text/plain; charset=utf-8")
            + "\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n"
        if method != "HEAD" { response += body }
        send(Array(response.utf8), to: connection, deadline: deadline)
    }

    /// The status line and body for a request head.
    func answer(to head: String) -> (status: String, body: String) {
        let parts = head.split(separator: "\r\n", maxSplits: 1).first?.split(separator: " ") ?? []
        guard parts.count == 3, parts[2].hasPrefix("HTTP/1.") else { return ("400 Bad Request", "bad request\n") }
        guard parts[0] == "GET" || parts[0] == "HEAD" else { return ("405 Method Not Allowed", "GET only\n") }
        let path = parts[1].split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        guard path == "/metrics", let catalog = serving.withLock({ $0.catalog }) else { return ("404 Not Found", "see /metrics\n") }
        return ("200 OK", exposition.text(for: catalog))
    }

    /// The request up to its blank line; nil when it is too big, too slow,
    /// the peer left, or the server is stopping.
    private func readHead(_ connection: Int32, deadline: Double) -> String? {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 2048)
        while bytes.count <= Self.maxRequestBytes {
            if let end = bytes.firstRange(of: [13, 10, 13, 10]) {
                return String(decoding: bytes[..<end.lowerBound], as: UTF8.self)
            }
            guard wait(for: connection, events: POLLIN, deadline: deadline) else { return nil }
            let count = recv(connection, &buffer, buffer.count, 0)
            if count < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            guard count > 0 else { return nil }
            bytes += buffer[..<count]
        }
        return nil
    }

    private func send(_ bytes: [UInt8], to connection: Int32, deadline: Double) {
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { Glibc.send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count < 0 && (errno == EINTR || errno == EAGAIN) {
                guard wait(for: connection, events: POLLOUT, deadline: deadline) else { return }
                continue
            }
            guard count > 0 else { return }
            sent += count
        }
    }

    /// Waits until `connection` is ready for `events`; false at the
    /// deadline, on an error, or when `stop()` was called.
    private func wait(for connection: Int32, events: Int32, deadline: Double) -> Bool {
        while true {
            let left = deadline - clock.monotonic()
            guard left > 0 else { return false }
            var fds = [pollfd(fd: connection, events: Int16(events), revents: 0),
                       pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
            let ready = poll(&fds, 2, Int32((left * 1000).rounded(.up)))
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0, fds[1].revents == 0 else { return false }
            return fds[0].revents & Int16(events) != 0 || fds[0].revents & Int16(POLLHUP | POLLERR) == 0
        }
    }
}
