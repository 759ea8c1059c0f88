// An in-memory HTTP server behind the Fetching seam, for core tests: it
// answers HEAD and Range GETs from byte arrays on a thread per transfer,
// calling the delegate the way CurlFetcher does, and records every request,
// cancel and promotion so a test can say "two concurrent reads, one GET".
// Knobs make it slow (a delay per chunk), hold bodies mid-flight, or fail.
import Foundation
import MediaNetwork
import MediaSupport
#if canImport(Glibc)
import Glibc
#endif

final class FakeFetcher: Fetching, @unchecked Sendable {
    struct Resource {
        var bytes: [UInt8]
        var etag: String? = "\"v1\""
        var lastModified: String? = "Tue, 01 Oct 2024 10:00:00 GMT"
        var contentType: String? = "video/mp4"
        /// Every request (HEAD and GET) is answered with this status and no body.
        var status: Int?
        /// GETs only are answered with this status and no body; HEAD still works.
        var getStatus: Int?
        /// Every request fails before any response, as an unreachable host does.
        var transportError = false
        /// Range requests are answered 200 with the whole body.
        var ignoresRange = false
        /// The next `shortResponses` GETs announce their full length but send
        /// this many bytes fewer.
        var shortBy: Int64 = 0
        var shortResponses = Int.max
        /// A short GET ends with an error (what curl reports) rather than success.
        var shortEndsWithError = true

        init(bytes: [UInt8]) { self.bytes = bytes }
    }

    struct Record {
        let id: TransferID
        let request: FetchRequest
        var status = 0
        /// Body bytes the server meant to send (after clipping and Range handling).
        var body: Range<Int64> = 0..<0
        /// Body bytes handed to the delegate.
        var delivered: Int64 = 0
        /// The client called cancel(id).
        var cancelled = false
        /// The delegate returned false from a receive callback.
        var stoppedByDelegate = false
        /// Body bytes it may deliver before it holds (`holds` only).
        var allowance = Int64.max
        /// The test asked it to give its connection up (`yieldHeld`).
        var yieldAsked = false
        var finished = false
        var completion: MediaError?

        var method: FetchRequest.Method { request.method }
        var range: Range<Int64>? { request.range }
        var priority: FetchRequest.Priority { request.priority }
        var ifRange: String? { request.ifRange }
    }

    /// Bytes per receiveBody call.
    let chunkSize: Int64

    private let condition = NSCondition()
    private var resources: [String: Resource] = [:]
    private var records: [Record] = []
    private var nextID: TransferID = 1
    private var cancels: [TransferID] = []
    private var promotions: [TransferID] = []
    private var deliveredTotal: Int64 = 0
    private var chunkDelay: Double = 0
    private var answerRoundTrip: Double?
    private var held: Range<Int64>?
    private var waitingAtHold: Set<TransferID> = []
    private var shuttingDown = false
    /// Whether it honours allowances, as CurlFetcher does (a chunk that
    /// crosses one is delivered whole, as libcurl's write piece is).
    private var holds = false
    /// Chunks a cancelled transfer still hands over: what libcurl had read
    /// before the cancel reached the network thread.
    private var lateChunks = 0

    init(chunkSize: Int64 = 64 << 10) {
        self.chunkSize = chunkSize
    }

    func setHolds(_ on: Bool) {
        locked { holds = on }
    }

    /// Ends a held transfer as CurlFetcher does for a waiting read.
    func yieldHeld(_ id: TransferID) {
        locked {
            if let index = slot(id) { records[index].yieldAsked = true }
        }
    }

    /// Whether the transfer has delivered its allowance and waits for more.
    func isHeld(_ id: TransferID) -> Bool {
        locked {
            guard let index = slot(id) else { return false }
            let record = records[index]
            return !record.finished && record.delivered >= record.allowance
        }
    }

    // MARK: Setting up

    func add(_ url: String, _ resource: Resource) {
        locked { resources[url] = resource }
    }

    func add(_ url: String, bytes: [UInt8]) {
        add(url, Resource(bytes: bytes))
    }

    func update(_ url: String, _ change: (inout Resource) -> Void) {
        locked { change(&resources[url]!) }
    }

    /// After a cancel, each transfer hands over `count` chunks more.
    func setLateChunks(_ count: Int) {
        locked { lateChunks = count }
    }

    /// Sleep before each chunk: a slow server.
    func setChunkDelay(_ seconds: Double) {
        locked { chunkDelay = seconds }
    }

    /// Every answer tells the link's round trip as measured (an SFTP
    /// open's, a connection's): a far link without waiting for one.
    func setAnswerRoundTrip(_ seconds: Double?) {
        locked { answerRoundTrip = seconds }
    }

    /// Transfers stop before a chunk starting inside `bytes` until `release()`.
    func hold(_ bytes: Range<Int64> = 0..<Int64.max) {
        locked { held = bytes }
    }

    func release() {
        locked { held = nil }
    }

    // MARK: Observing

    var allRecords: [Record] { locked { records } }
    var gets: [Record] { allRecords.filter { $0.method == .get } }
    var heads: [Record] { allRecords.filter { $0.method == .head } }
    var requestCount: Int { locked { records.count } }
    var cancelled: [TransferID] { locked { cancels } }
    var promoted: [TransferID] { locked { promotions } }
    var bodyBytesDelivered: Int64 { locked { deliveredTotal } }
    var transfersWaitingAtHold: Set<TransferID> { locked { waitingAtHold } }

    func record(_ id: TransferID) -> Record? {
        locked { slot(id).map { records[$0] } }
    }

    /// Waits until `predicate` holds of the fake's state; false on timeout.
    @discardableResult
    func waitUntil(timeout: Double = 10, _ predicate: (FakeFetcher) -> Bool) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        while !predicate(self) {
            condition.lock()
            let alive = condition.wait(until: min(deadline, Date(timeIntervalSinceNow: 0.01)))
            condition.unlock()
            if !alive && Date() >= deadline { return predicate(self) }
        }
        return true
    }

    /// Lets every transfer end (held ones are cancelled) and waits for their
    /// threads, so no delegate runs after a test's tear-down.
    func shutdown() {
        locked {
            shuttingDown = true
            held = nil
        }
        waitUntil(timeout: 20) { $0.allRecords.allSatisfy(\.finished) }
    }

    // MARK: Fetching

    @discardableResult
    func start(_ request: FetchRequest, delegate: TransferDelegate) -> TransferID {
        let id = locked { () -> TransferID in
            let id = nextID
            nextID += 1
            var record = Record(id: id, request: request)
            if holds, let allowance = request.allowance { record.allowance = allowance }
            records.append(record)
            return id
        }
        let thread = Thread { [self] in serve(id, request, delegate) }
        thread.name = "FakeFetcher \(id)"
        thread.start()
        return id
    }

    func cancel(_ id: TransferID) {
        locked {
            cancels.append(id)
            if let index = slot(id) { records[index].cancelled = true }
        }
    }

    func promote(_ id: TransferID) {
        locked { promotions.append(id) }
    }

    func holdsTransfers(of url: String) -> Bool { locked { holds } }

    func allow(_ id: TransferID, through bytes: Int64) {
        locked {
            guard holds, let index = slot(id) else { return }
            records[index].allowance = max(records[index].allowance, bytes)
        }
    }

    // MARK: Serving (on the transfer's thread)

    private func serve(_ id: TransferID, _ request: FetchRequest, _ delegate: TransferDelegate) {
        let resource = locked { () -> Resource? in
            guard var resource = resources[request.url] else { return nil }
            if request.method == .get && resource.shortBy > 0 && resource.shortResponses > 0 {
                resources[request.url]!.shortResponses -= 1
            } else {
                resource.shortBy = 0
            }
            return resource
        }
        guard let resource else {
            return respond(id, delegate, status: 404, headers: [:], body: 0..<0, bytes: [], send: 0..<0)
        }
        if resource.transportError {
            return finish(id, delegate, MediaError(EIO, "Could not connect to server"))
        }
        let length = Int64(resource.bytes.count)
        var headers: [String: String] = ["accept-ranges": "bytes"]
        headers["etag"] = resource.etag
        headers["last-modified"] = resource.lastModified
        headers["content-type"] = resource.contentType
        if let status = resource.status ?? (request.method == .get ? resource.getStatus : nil) {
            return respond(id, delegate, status: status, headers: ["content-length": "0"], body: 0..<0,
                           bytes: [], send: 0..<0)
        }
        guard request.method == .get else {
            headers["content-length"] = "\(length)"
            return respond(id, delegate, status: 200, headers: headers, body: 0..<0, bytes: [], send: 0..<0)
        }
        var status = 200
        var body = 0..<length
        let validatorMatches = request.ifRange == nil || request.ifRange == resource.etag
            || request.ifRange == resource.lastModified
        if let range = request.range, !resource.ignoresRange, validatorMatches {
            if range.lowerBound >= length {
                status = 416
                body = 0..<0
                headers["content-range"] = "bytes */\(length)"
            } else {
                status = 206
                body = range.lowerBound..<min(range.upperBound, length)
                headers["content-range"] = "bytes \(body.lowerBound)-\(body.upperBound - 1)/\(length)"
            }
        }
        headers["content-length"] = "\(body.count)"
        let send = body.lowerBound..<max(body.lowerBound, body.upperBound - resource.shortBy)
        respond(id, delegate, status: status, headers: headers, body: body, bytes: resource.bytes, send: send,
                shortError: resource.shortEndsWithError)
    }

    private func respond(_ id: TransferID, _ delegate: TransferDelegate, status: Int, headers: [String: String],
                         body: Range<Int64>, bytes: [UInt8], send: Range<Int64>, shortError: Bool = true) {
        locked {
            let index = slot(id)!
            records[index].status = status
            records[index].body = body
        }
        guard !isCancelled(id) else { return finish(id, delegate, MediaError(ECANCELED, "cancelled")) }
        var head = ResponseHead(status: status, headers: headers)
        if let seconds = locked({ answerRoundTrip }) { head.roundTrip = .measured(seconds) }
        guard delegate.transfer(id, receiveHead: head) else {
            markStopped(id)
            return finish(id, delegate, MediaError(ECANCELED, "stopped by the cache"))
        }
        var position = send.lowerBound
        var late: Int?  // chunks left to hand over, once cancelled
        while position < send.upperBound {
            switch waitForTurn(id, at: position) ? waitForAllowance(id) : .cancelled {
            case .cancelled:
                late = late ?? locked { shuttingDown ? 0 : lateChunks }
                guard late! > 0 else { return finish(id, delegate, MediaError(ECANCELED, "cancelled")) }
                late! -= 1
            case .yielded: return finish(id, delegate, MediaError(FetchError.yielded, "gave its connection to a waiting read"))
            case .go: break
            }
            let chunkEnd = min(position + chunkSize, send.upperBound)
            let accepted = bytes[Int(position)..<Int(chunkEnd)].withUnsafeBytes {
                delegate.transfer(id, receiveBody: $0)
            }
            locked {
                let index = slot(id)!
                records[index].delivered += chunkEnd - position
                deliveredTotal += chunkEnd - position
            }
            guard accepted else {
                markStopped(id)
                return finish(id, delegate, MediaError(ECANCELED, "stopped by the cache"))
            }
            position = chunkEnd
        }
        if send.upperBound < body.upperBound && shortError {
            return finish(id, delegate, MediaError(EIO, "transfer closed with \(body.upperBound - send.upperBound) bytes remaining to read"))
        }
        finish(id, delegate, nil)
    }

    /// Waits out the chunk delay and any hold over `position`; false when
    /// the transfer was cancelled meanwhile.
    private func waitForTurn(_ id: TransferID, at position: Int64) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        let delayEnd = Date(timeIntervalSinceNow: chunkDelay)
        while true {
            let index = slot(id)!
            if records[index].cancelled || shuttingDown {
                waitingAtHold.remove(id)
                return !records[index].cancelled && !shuttingDown
            }
            if let held, held.contains(position) {
                waitingAtHold.insert(id)
                condition.broadcast()
                condition.wait()
                continue
            }
            waitingAtHold.remove(id)
            if Date() < delayEnd {
                _ = condition.wait(until: delayEnd)
                continue
            }
            return true
        }
    }

    private enum AllowanceWait { case go, cancelled, yielded }

    /// Holds while the transfer has delivered its allowance, until it is
    /// allowed more, cancelled, or asked to yield.
    private func waitForAllowance(_ id: TransferID) -> AllowanceWait {
        condition.lock()
        defer { condition.unlock() }
        while true {
            let record = records[slot(id)!]
            if record.cancelled || shuttingDown { return .cancelled }
            if record.delivered < record.allowance { return .go }
            if record.yieldAsked { return .yielded }
            condition.broadcast()
            condition.wait()
        }
    }

    private func isCancelled(_ id: TransferID) -> Bool {
        locked { records[slot(id)!].cancelled }
    }

    private func markStopped(_ id: TransferID) {
        locked {
            let index = slot(id)!
            records[index].stoppedByDelegate = true
        }
    }

    /// Completes exactly once; `finished` is set only after the delegate returned.
    private func finish(_ id: TransferID, _ delegate: TransferDelegate, _ error: MediaError?) {
        delegate.transfer(id, completeWith: error)
        locked {
            let index = slot(id)!
            records[index].completion = error
            records[index].finished = true
        }
    }

    /// Where transfer `id`'s record is: ids are handed out in order from 1
    /// and each record is appended as its id is, so it is at `id - 1` (a
    /// search of every record per chunk made the fake, not the loader, the
    /// cost of the long unit tests under ThreadSanitizer). Call with the lock held.
    private func slot(_ id: TransferID) -> Int? {
        let index = Int(truncatingIfNeeded: id &- 1)
        return records.indices.contains(index) && records[index].id == id ? index : nil
    }

    /// Runs `body` under the lock and wakes every waiter: state changed.
    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        condition.lock()
        defer { condition.broadcast(); condition.unlock() }
        return try body()
    }
}
