// Learns a URL's ContentInfo. A lookup that a reader waits on asks for the
// file's first bytes with a ranged GET: the answer's Content-Range gives the
// length, and its body is handed over to the loader as a transfer, so the
// first read needs no second round trip. A listing's background probes stay
// byte-frugal: HEAD first; where HEAD fails or gives no length, GET with
// `Range: bytes=0-0` (stopped after the head). A server that cannot be
// reached gets no second try here. Runs on the fetcher's thread and reports
// once, and how long it took to the fetcher's statistics.
#if canImport(Glibc)
import Glibc
#endif
import MediaSupport
import MediaStore
import MediaNetwork

package final class ContentProbe: TransferDelegate, Sendable {
    package typealias Completion = @Sendable (Result<ContentInfo, MediaError>) -> Void
    /// Told what a ranged GET learned, with its transfer still running, and
    /// when it was asked for: returns the delegate that takes the body over
    /// (the info then counts as reported), or nil to stop it and report
    /// through the completion.
    package typealias Handover = @Sendable (ContentInfo, TransferID, ResponseHead, _ askedAt: Double) -> TransferDelegate?

    package enum Step: Equatable {
        /// GET the first bytes, whose body the handover takes; `openEnded`:
        /// the rest of the file asked for too, held by the fetcher after
        /// that many (a player's lookup: its stream on the head's own
        /// connection, decision 0061).
        case firstBytes(Int64, openEnded: Bool)
        case head
        /// GET `bytes=0-0`, stopped after the head.
        case byteZero
    }

    private let url: String
    private let fetcher: Fetching
    private let completion: Completion
    private let handover: Handover?
    private struct Progress {
        var head: ResponseHead?
        var step: Step
        var nextSteps: [Step]
        /// Where a handed-over body goes; set once the info was reported.
        var sink: TransferDelegate?
        var handedOver = false
        /// When the current step's request was sent (on the monotonic
        /// clock): set before the fetcher has it, read on its thread after.
        var sentAt = 0.0
    }

    /// Touched on the fetcher's thread (and by `send` before the fetcher
    /// has the request); behind a lock all the same, uncontended, so the
    /// compiler checks what crosses threads. A leaf: the sink, the handover
    /// and the fetcher are called with it let go.
    private let progress: Locked<Progress>
    /// The running request and its priority; a lookup waiting on a
    /// background probe makes it a read (`promote`).
    private let current: Locked<(id: TransferID, priority: FetchRequest.Priority)>
    /// On `clock.monotonic()`: how long learning the answer took.
    private let started: Double

    /// The mount's clock, for `sentAt` (the handover measures the link by it).
    private let clock: Clock

    private init(url: String, fetcher: Fetching, clock: Clock, priority: FetchRequest.Priority, steps: [Step],
                 handover: Handover?, completion: @escaping Completion) {
        current = Locked((0, priority), rank: .contentProbe)
        self.clock = clock
        started = clock.monotonic()
        self.url = url
        self.fetcher = fetcher
        self.completion = completion
        self.handover = handover
        progress = Locked(Progress(step: steps[0], nextSteps: Array(steps.dropFirst())), rank: .contentProbeProgress)
    }

    /// Starts learning `url`'s ContentInfo: at `.read` priority for a
    /// lookup that waits, `.probe` for a listing's entries in the background.
    /// With `firstBytes` and a `handover`, a ranged GET asks for that many
    /// bytes (HEAD only if its answer gives no length); `openEnded`, for the
    /// rest of the file, held after them.
    @discardableResult
    package static func start(url: String, fetcher: Fetching, clock: Clock, priority: FetchRequest.Priority = .read,
                      firstBytes: Int64 = 0, openEnded: Bool = false, handover: Handover? = nil,
                      completion: @escaping Completion) -> ContentProbe {
        let steps: [Step] = firstBytes > 0 && handover != nil
            ? [.firstBytes(firstBytes, openEnded: openEnded), .head] : [.head, .byteZero]
        let probe = ContentProbe(url: url, fetcher: fetcher, clock: clock, priority: priority, steps: steps, handover: handover, completion: completion)
        probe.send(priority: priority)
        return probe
    }

    private func send(priority: FetchRequest.Priority) {
        let request: FetchRequest
        let now = clock.monotonic()
        let step = progress.withLock { progress in
            progress.sentAt = now
            return progress.step
        }
        switch step {
        case .firstBytes(let count, openEnded: false):
            Log.debug("GET \(MediaError.redacted(url)) bytes 0-\(count - 1) (probe)")
            request = FetchRequest(url: url, range: 0..<count, priority: priority)
        case .firstBytes(let count, openEnded: true):
            Log.debug("GET \(MediaError.redacted(url)) bytes 0- (probe, held at \(count))")
            var held = FetchRequest(url: url, range: 0..<FetchRequest.toTheEnd, priority: priority)
            held.allowance = count
            request = held
        case .head:
            Log.debug("HEAD \(MediaError.redacted(url))")
            request = FetchRequest(url: url, method: .head, priority: priority)
        case .byteZero:
            Log.debug("GET \(MediaError.redacted(url)) bytes 0-0")
            request = FetchRequest(url: url, range: 0..<1, priority: priority)
        }
        current.withLock { current in
            current.priority = min(current.priority, request.priority)
            var request = request
            request.priority = current.priority
            current.id = fetcher.start(request, delegate: self)
        }
    }

    /// A lookup now waits on this probe: it jumps the background queue.
    package func promote() {
        current.withLock { current in
            guard current.priority != .read else { return }
            current.priority = .read
            fetcher.promote(current.id)
        }
    }

    package func transfer(_ id: TransferID, receiveHead head: ResponseHead) -> Bool {
        let (step, sentAt) = progress.withLock { progress in
            progress.head = head
            return (progress.step, progress.sentAt)
        }
        switch step {
        case .head: return true
        case .byteZero: return false
        case .firstBytes:
            // A 416 (an empty file) or an answer without a usable length
            // has no body worth keeping; `complete` judges it.
            guard head.status == 206 || head.status == 200, let handover,
                  let info = Self.info(from: head), info.length > 0 else { return false }
            progress.withLock { $0.handedOver = true }
            fetcher.statistics?.timings.probeDuration.observe(since: started, on: clock)
            let sink = handover(info, id, head, sentAt)
            progress.withLock { $0.sink = sink }
            return sink != nil
        }
    }

    package func transfer(_ id: TransferID, receiveBody bytes: UnsafeRawBufferPointer) -> Bool {
        progress.withLock { $0.sink }?.transfer(id, receiveBody: bytes) ?? false
    }

    package func transfer(_ id: TransferID, completeWith error: MediaError?) {
        // What to do next, decided under the lock and done after it.
        enum Next { case handOn(TransferDelegate?), report(Result<ContentInfo, MediaError>), retry(Step, Int) }
        let next: Next = progress.withLock { progress in
            if progress.handedOver {
                defer { progress.sink = nil }
                return .handOn(progress.sink)
            }
            if let head = progress.head, let info = Self.info(from: head) { return .report(.success(info)) }
            let failure = progress.head.map(\.failure) ?? MediaError.io(error?.message ?? "no response")
            if let head = progress.head, failure.errno != ENOENT, !progress.nextSteps.isEmpty {
                let failed = progress.step
                progress.step = progress.nextSteps.removeFirst()
                progress.head = nil
                return .retry(failed, head.status)
            }
            return .report(.failure(failure))
        }
        switch next {
        case .handOn(let sink):
            sink?.transfer(id, completeWith: error)
        case .report(let result):
            report(result)
        case .retry(let failed, let status):
            Log.debug("\(MediaError.redacted(url)): the probe's \(failed) gave HTTP \(status)")
            send(priority: .probe)
        }
    }

    private func report(_ result: Result<ContentInfo, MediaError>) {
        fetcher.statistics?.timings.probeDuration.observe(since: started, on: clock)
        completion(result)
    }

    package static func info(from head: ResponseHead) -> ContentInfo? {
        let length: Int64?
        var acceptsRanges = head.acceptsRanges
        switch head.status {
        case 206:
            length = head.contentRange?.total
            acceptsRanges = true
        case 200..<300:
            length = head.contentLength
        case 416:
            length = head.unsatisfiedRangeTotal
        default:
            return nil
        }
        guard let length, Limits.isLength(length) else { return nil }
        return ContentInfo(length: length, contentType: head.contentType, etag: head.etag,
                           lastModified: head.lastModified, acceptsRanges: acceptsRanges)
    }
}
