// A tiny HTTP/1.1 server on 127.0.0.1 for the CurlFetcher tests: it answers
// every request with 200 and a 5-byte body (or `bodySize` bytes of byte
// i = i % 251; none to HEAD), keeps connections alive, and counts requests and how many it was serving at once. While
// `held`, answers wait, so a test sees how many transfers the fetcher runs.
import Foundation
#if canImport(Glibc)
import Glibc
import MediaNetwork
import MediaSupport
#endif

final class LoopbackServer: @unchecked Sendable {
    private struct State {
        var requests = 0
        var serving = 0
        var mostServing = 0
        var held = false
        var stopped = false
    }

    let port: Int
    private let listener: Int32
    private let condition = NSCondition()
    private var state = State()
    private var acceptThread: Thread?

    let bodySize: Int
    /// Made once: a debug build under TSan takes seconds to make 8 MiB.
    private let body: [UInt8]

    init(bodySize: Int = 5) throws {
        self.bodySize = bodySize
        if bodySize == 5 {
            body = Array("hello".utf8)
        } else {
            var bytes = [UInt8](repeating: 0, count: bodySize)
            bytes.withUnsafeMutableBufferPointer { out in
                for i in 0..<out.count { out[i] = UInt8(truncatingIfNeeded: i % 251) }
            }
            body = bytes
        }
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(listener, pointer, length) == 0 && listen(listener, 128) == 0
                    && getsockname(listener, pointer, &length) == 0
            }
        }
        guard bound else { throw POSIXError(.EADDRINUSE) }
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in acceptConnections() }
        acceptThread = thread
        thread.start()
    }

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)/\(path)" }

    var requests: Int { condition.withLock { state.requests } }
    /// The most requests answered at once so far.
    var mostServing: Int { condition.withLock { state.mostServing } }
    var serving: Int { condition.withLock { state.serving } }

    /// Holds answers (true) or lets them go (false).
    func hold(_ held: Bool) {
        condition.withLock {
            state.held = held
            condition.broadcast()
        }
    }

    /// Waits until `predicate` holds for the state, or `seconds` pass (a bound against a hang).
    func wait(seconds: Double, until predicate: (_ requests: Int, _ serving: Int) -> Bool) -> Bool {
        let deadline = Date(timeIntervalSinceNow: seconds)
        condition.lock()
        defer { condition.unlock() }
        while !predicate(state.requests, state.serving) {
            if !condition.wait(until: deadline) { return predicate(state.requests, state.serving) }
        }
        return true
    }

    func stop() {
        condition.withLock {
            state.stopped = true
            state.held = false
            condition.broadcast()
        }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    /// Writes all of `bytes` (a client that reads slowly blocks it);
    /// -1 once the client is gone (no SIGPIPE: MSG_NOSIGNAL).
    private func sendAll(_ bytes: [UInt8], to connection: Int32) -> Int {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { send(connection, $0.baseAddress! + offset, bytes.count - offset,
                                                 Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return -1 }
            offset += n
        }
        return offset
    }

    private func acceptConnections() {
        while true {
            let connection = accept(listener, nil, nil)
            if connection < 0 { return }
            Thread.detachNewThread { [self] in serve(connection) }
        }
    }

    private func serve(_ connection: Int32) {
        defer { close(connection) }
        var pending = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            guard let end = pending.firstRange(of: Array("\r\n\r\n".utf8)) else {
                let n = read(connection, &buffer, buffer.count)
                if n <= 0 { return }
                pending += buffer[0..<n]
                continue
            }
            let head = String(decoding: pending[..<end.lowerBound], as: UTF8.self)
            pending.removeSubrange(..<end.upperBound)
            let stopped = condition.withLock { () -> Bool in
                state.requests += 1
                state.serving += 1
                state.mostServing = max(state.mostServing, state.serving)
                condition.broadcast()
                while state.held && !state.stopped { condition.wait() }
                return state.stopped
            }
            var answer = Array("HTTP/1.1 200 OK\r\nContent-Length: \(bodySize)\r\n\r\n".utf8)
            if !head.hasPrefix("HEAD ") {
                answer += body
            }
            let sent = stopped ? -1 : sendAll(answer, to: connection)
            condition.withLock {
                state.serving -= 1
                condition.broadcast()
            }
            if sent < 0 { return }
        }
    }
}
