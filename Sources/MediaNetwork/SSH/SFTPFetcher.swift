// The Fetching seam, with `sftp://` reads on libssh2 in it: a GET or HEAD
// of an sftp:// file runs on a session SFTPSessions keeps (the one the
// mount's check and listings logged in with: no login of libcurl's own),
// on the file's handle kept open between reads, with libssh2's reads
// pipelined ahead of the data (SFTPSession+Reads). Anything else goes to
// the fetcher beneath (libcurl) unchanged, FTP among it.
//
// Threads: libssh2's sessions are not thread-safe; a transfer runs on a
// worker thread of its server's (server and login: SFTPSessions' key)
// with a session of its own, kept from one transfer to the next and given
// back when the worker ends. At most
// `maxSessionsPerServer` run at once per server, more than one only for
// readers waiting (`addWorker`); the rest queue, most urgent first, then
// in order. A worker added beside others logs in before it takes a
// transfer: the queue goes on to whichever worker is free first, not to
// one still logging in (across an ocean a login is most of a second, ten
// times a kept session's read). Its transfers' IDs have bit 62 set (the
// segmented fetcher above takes bit 63, libcurl counts from 1).
//
// What the libcurl path gave, kept: the head RemoteFileHead makes (206,
// `Content-Range`, the file's mtime as `Last-Modified`, so a file changed
// since its listing fails its read instead of mixing versions), libcurl's
// errno mapping (ENOENT, EACCES, else EIO), `--timeout` on every wait
// (EIO, one log line naming the host), `--bwlimit` (a bucket of its own at
// the same rate), a session that drops mid-read replaced once and the read
// going on where it stopped. Not kept: held transfers (`holdsTransfers` is
// false: a sequential reader's windows are requests of their own, each on
// the kept handle, so one costs its data's round trip and no more) and
// preload pausing while reads run (priorities order the queue only).
import MediaSupport
import Synchronization
import Foundation

package final class SFTPFetcher: Fetching, @unchecked Sendable {
    private static let ownBit: TransferID = 1 << 62
    /// Sessions (and worker threads) reading at once per server and login:
    /// a player's read, its readahead and a scan's probe at once, within
    /// OpenSSH's default MaxSessions (10) and MaxStartups (10).
    package static let maxSessionsPerServer = 4
    /// A session that drops is replaced this many times in one transfer.
    static let maxReconnects = 2

    private struct State {
        var next: TransferID = SFTPFetcher.ownBit
        var queued: [String: [SFTPTransfer]] = [:]
        var workers: [String: Int] = [:]
        /// Of those, added ones still logging in: they take no transfer yet.
        var loggingIn: [String: Int] = [:]
        var running: [TransferID: SFTPTransfer] = [:]
        var stopping = false
    }

    private let base: Fetching
    private let options: HTTPOptions
    private let timeout: Int
    private let clock: Clock
    private let state = ConditionLocked(State())
    /// `--bwlimit` for these reads; nil without.
    private let pace: SFTPPace?

    package init(base: Fetching, options: HTTPOptions, timeout: Int, clock: Clock, bytesPerSecond: Int64? = nil) {
        self.base = base
        self.options = options
        self.timeout = timeout
        self.clock = clock
        pace = SFTPPace(bytesPerSecond: bytesPerSecond, clock: clock)
    }

    /// Whether `request` is read here: a file's GET or HEAD over sftp://.
    static func reads(_ request: FetchRequest) -> Bool {
        (request.method == .get || request.method == .head) && MediaURL.writtenScheme(of: request.url) == "sftp"
    }

    package var statistics: Statistics? { base.statistics }

    @discardableResult
    package func start(_ request: FetchRequest, delegate: TransferDelegate) -> TransferID {
        guard Self.reads(request) else { return base.start(request, delegate: delegate) }
        let server = SFTPSessions.key(url: request.url, options: options)
        let (transfer, worker, stopping) = state.withLock { state -> (SFTPTransfer, Worker?, Bool) in
            let transfer = SFTPTransfer(id: state.next, request: request, delegate: delegate, server: server)
            state.next += 1
            guard !state.stopping else { return (transfer, nil, true) }
            state.queued[server, default: []].append(transfer)
            return (transfer, Self.addWorker(for: transfer.priority, server, &state), false)
        }
        if stopping {
            transfer.delegate.transfer(transfer.id, completeWith: MediaError(ECANCELED, "shutting down"))
        } else if let worker {
            Thread.detachNewThread { [self] in work(server, worker, url: request.url) }
        }
        return transfer.id
    }

    package func cancel(_ id: TransferID) {
        guard id & Self.ownBit != 0 else { return base.cancel(id) }
        let queued = state.withLock { state -> SFTPTransfer? in
            for (server, list) in state.queued {
                if let index = list.firstIndex(where: { $0.id == id }) {
                    return state.queued[server]!.remove(at: index)
                }
            }
            state.running[id]?.cancel()
            return nil
        }
        queued?.delegate.transfer(id, completeWith: MediaError(ECANCELED, "cancelled"))
    }

    package func promote(_ id: TransferID) {
        promote(id, to: .read)
    }

    package func promote(_ id: TransferID, to priority: FetchRequest.Priority) {
        guard id & Self.ownBit != 0 else { return base.promote(id, to: priority) }
        let spawn = state.withLock { state -> (String, Worker, String)? in
            state.running[id]?.promote(to: priority)
            for (server, list) in state.queued {
                guard let transfer = list.first(where: { $0.id == id }) else { continue }
                transfer.promote(to: priority)
                return Self.addWorker(for: transfer.priority, server, &state).map { (server, $0, transfer.request.url) }
            }
            return nil
        }
        if let (server, worker, url) = spawn { Thread.detachNewThread { [self] in work(server, worker, url: url) } }
    }

    /// A worker thread: a server's first, or one added beside others.
    private enum Worker { case first, added }

    /// Whether a transfer of `priority` just queued for `server` gets a
    /// worker of its own (counted here): a first when no worker takes
    /// transfers (those still logging in take none, and a queue left to
    /// them would wait out their login); another, with a session of its
    /// own (a login, when none is kept: most of a second across an
    /// ocean), only for a reader waiting now, never for readahead or a
    /// probe, which wait for the workers there are.
    private static func addWorker(for priority: FetchRequest.Priority, _ server: String,
                                  _ state: inout State) -> Worker? {
        let workers = state.workers[server, default: 0]
        if workers == state.loggingIn[server, default: 0] {
            state.workers[server] = workers + 1
            return .first
        }
        guard priority == .read, workers < maxSessionsPerServer else { return nil }
        state.workers[server] = workers + 1
        state.loggingIn[server, default: 0] += 1
        return .added
    }

    package func allow(_ id: TransferID, through bytes: Int64) {
        guard id & Self.ownBit != 0 else { return base.allow(id, through: bytes) }
    }

    package func holdsTransfers(of url: String) -> Bool {
        MediaURL.writtenScheme(of: url) == "sftp" ? false : base.holdsTransfers(of: url)
    }

    package func partOffsets(of url: String) -> [Int64]? { base.partOffsets(of: url) }

    package func shutdown() {
        let queued = state.withLock { state -> [SFTPTransfer] in
            state.stopping = true
            for transfer in state.running.values { transfer.cancel() }
            defer { state.queued = [:] }
            return state.queued.values.flatMap { $0 }
        }
        for transfer in queued {
            transfer.delegate.transfer(transfer.id, completeWith: MediaError(ECANCELED, "shutting down"))
        }
        // A worker blocked on a dead server wakes at the timeout at most.
        let deadline = Deadline.after(seconds: Double(timeout) + 1, clock: clock)
        state.withScope { scope in
            while scope.state.workers.values.contains(where: { $0 > 0 }) {
                if !scope.wait(until: deadline) { break }
            }
        }
        base.shutdown()
    }

    /// A worker of `server`'s: runs its queued transfers, most urgent
    /// first, until none is left, on one session it keeps from one to the
    /// next and gives back when it ends (one given back between them could
    /// be taken by a worker still logging in, and this one would log in
    /// with a reader's transfer in hand). One added beside others first
    /// takes a kept session or logs in (as `url`'s login); if the login
    /// fails, its transfers log in as the first's do, and say why.
    private func work(_ server: String, _ worker: Worker, url: String) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: SFTPSession.readBufferSize, alignment: 16)
        defer { buffer.deallocate() }
        var session: SFTPSession?
        if worker == .added {
            do {
                session = try SFTPSessions.take(url: url, options: options)
                    ?? SFTPSession(url: url, options: options, timeout: timeout)
            } catch {
                let message = (error as? MediaError)?.message ?? "\(error)"
                Log.debug("\(MediaError.redacted(url)): another SFTP session for a waiting read failed (\(message))")
            }
            state.withLock { state in
                state.loggingIn[server, default: 1] -= 1
                if state.loggingIn[server] == 0 { state.loggingIn[server] = nil }
            }
        }
        while let transfer = next(of: server) {
            run(transfer, on: &session, buffer: buffer)
            state.withLock { _ = $0.running.removeValue(forKey: transfer.id) }
        }
        if let session { SFTPSessions.give(session, url: url, options: options) }
    }

    private func next(of server: String) -> SFTPTransfer? {
        state.withScope { scope in
            let list = scope.state.queued[server] ?? []
            guard !scope.state.stopping,
                  let index = list.indices.min(by: { (list[$0].priority, $0) < (list[$1].priority, $1) }) else {
                scope.state.workers[server, default: 1] -= 1
                if scope.state.workers[server] == 0 { scope.state.workers[server] = nil }
                scope.broadcast()
                return nil
            }
            let transfer = scope.state.queued[server]!.remove(at: index)
            if scope.state.queued[server]!.isEmpty { scope.state.queued[server] = nil }
            scope.state.running[transfer.id] = transfer
            return transfer
        }
    }

    /// Runs one transfer to its end on `held` (the worker's session), else
    /// on a kept one, a new one when none is kept or one drops, and tells
    /// its delegate. The session it ended well on is left in `held`.
    private func run(_ transfer: SFTPTransfer, on held: inout SFTPSession?, buffer: UnsafeMutableRawBufferPointer) {
        let request = transfer.request
        let path = SFTPSession.remotePath(MediaURL(request.url)?.path ?? "/")
        var progress = SFTPReadProgress(request: request)
        var reconnects = 0
        // After a failure, a new session: those kept may have dropped with it.
        var mayUseKept = true
        while true {
            if transfer.cancelled { return finish(transfer, progress, MediaError(ECANCELED, "cancelled")) }
            var session: SFTPSession?
            do {
                if mayUseKept { session = held ?? SFTPSessions.take(url: request.url, options: options) }
                held = nil
                let current = try session ?? SFTPSession(url: request.url, options: options, timeout: timeout)
                session = current
                let outcome = try read(transfer, path: path, on: current, progress: &progress, buffer: buffer)
                if !current.broken { held = current }
                return finish(transfer, progress, outcome)
            } catch {
                if let session { SFTPSessions.give(session, url: request.url, options: options) }
                let failure = error as? MediaError ?? MediaError.io("\(error)")
                // A session that dropped (a server restarted, a connection
                // killed) is replaced; one that timed out is not waited on twice.
                guard session?.broken ?? SFTPSessions.isTransport(failure), reconnects < Self.maxReconnects,
                      !failure.message.contains("--timeout") else {
                    return finish(transfer, progress, failure)
                }
                reconnects += 1
                mayUseKept = false
                Log.debug("\(MediaError.redacted(request.url)): SFTP session lost (\(failure.message)); on a new one")
            }
        }
    }

    /// The transfer's head (once) and bytes from where it got to; the
    /// error it ends with, nil when it ended well.
    private func read(_ transfer: SFTPTransfer, path: String, on session: SFTPSession,
                      progress: inout SFTPReadProgress, buffer: UnsafeMutableRawBufferPointer) throws -> MediaError? {
        let request = transfer.request
        // Readahead and preload are windows of a sequential read, the next
        // one after them.
        let streaming = request.priority == .readahead || request.priority == .preload
        let first = request.method == .get
            ? SFTPSession.FirstRead(range: progress.remaining ?? request.range ?? 0..<Int64.max, streaming: streaming) : nil
        let file = try session.openFile(path: path, validator: progress.head == nil ? request.ifRange : nil,
                                        clock: clock, first: first, buffer: buffer)
        if progress.head != nil {
            // Going on after a dropped session: the same version only.
            guard file.mtime == progress.mtime else {
                return MediaError(EIO, "sftp \(session.name): '\(path)' changed while it was read")
            }
        } else {
            // The loader learns the link from it (LinkEstimate): a kept
            // handle's bytes may have been asked for before this read, so
            // only an open is timed.
            progress.begin(size: file.size, mtime: file.mtime, roundTrip: file.opening.map { .measured($0) } ?? .unknown)
        }
        // The head goes with the first bytes (SFTPReadProgress), at once
        // when there are none to read.
        guard let range = progress.remaining, !range.isEmpty else { return tellHead(transfer, &progress) }
        var stopped: MediaError?
        _ = try session.read(path: path, range: range, streaming: streaming, buffer: buffer) { bytes in
            if let refused = tellHead(transfer, &progress) {
                stopped = refused
                return false
            }
            pace?.wait(for: bytes.count, priority: transfer.priority)
            guard !transfer.cancelled, transfer.delegate.transfer(transfer.id, receiveBody: bytes) else {
                stopped = MediaError(ECANCELED, transfer.cancelled ? "cancelled" : "stopped by the cache")
                return false
            }
            progress.delivered(Int64(bytes.count))
            return true
        }
        if let stopped { return stopped }
        if let refused = tellHead(transfer, &progress) { return refused }
        // The file ended before the length its head announced.
        if let left = progress.remaining, !left.isEmpty {
            return MediaError(EIO, "sftp \(session.name): '\(path)' ended \(left.count) bytes early")
        }
        return nil
    }

    /// Tells the delegate the head, if it has not been told: counted as
    /// a response; an error when the delegate refuses it.
    private func tellHead(_ transfer: SFTPTransfer, _ progress: inout SFTPReadProgress) -> MediaError? {
        guard let head = progress.tell() else { return nil }
        statistics?.countResponse(Statistics.ResponseClass(status: head.status))
        return transfer.delegate.transfer(transfer.id, receiveHead: head) ? nil
            : MediaError(ECANCELED, "stopped by the cache")
    }

    private func finish(_ transfer: SFTPTransfer, _ progress: SFTPReadProgress, _ error: MediaError?) {
        if let error, !progress.told, error.errno != ECANCELED {
            statistics?.countResponse(.error)
        }
        transfer.delegate.transfer(transfer.id, completeWith: error)
    }
}
