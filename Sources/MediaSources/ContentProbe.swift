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

package final class ContentProbe: TransferDelegate, @unchecked Sendable {
    package typealias Completion = @Sendable (Result<ContentInfo, MediaError>) -> Void
    /// Told what a ranged GET learned, with its transfer still running, and
    /// when it was asked for: returns the delegate that takes the body over
    /// (the info then counts as reported), or nil to stop it and report
    /// through the completion.
    package typealias Handover = @Sendable (ContentInfo, TransferID, ResponseHead, _ askedAt: Double) -> TransferDelegate?

    package enum Step: Equatable {
        /// GET the first bytes, whose body the handover takes.
        case firstBytes(Int64)
        case head
        /// GET `bytes=0-0`, stopped after the head.
        case byteZero
    }

    private let url: String
    private let fetcher: Fetching
    private let completion: Completion
    private let handover: Handover?
    /// Touched only on the fetcher's thread.
    private var head: ResponseHead?
    private var step: Step
    private var nextSteps: [Step]
    /// Where a handed-over body goes; set once the info was reported.
    private var sink: TransferDelegate?
    private var handedOver = false
    /// When the current step's request was sent (on the monotonic clock): set
    /// before the fetcher has it, read on the fetcher's thread after.
    private var sentAt = 0.0
    /// The running request and its priority; a lookup waiting on a
    /// background probe makes it a read (`promote`).
    private let current: Locked<(id: TransferID, priority: FetchRequest.Priority)>
    private let started = Histogram.now()

    /// The mount's clock, for `sentAt` (the handover measures the link by it).
    private let clock: Clock

    private init(url: String, fetcher: Fetching, clock: Clock, priority: FetchRequest.Priority, steps: [Step],
                 handover: Handover?, completion: @escaping Completion) {
        current = Locked((0, priority), rank: .contentProbe)
        self.clock = clock
        self.url = url
        self.fetcher = fetcher
        self.completion = completion
        self.handover = handover
        self.step = steps[0]
        self.nextSteps = Array(steps.dropFirst())
    }

    /// Starts learning `url`'s ContentInfo: at `.read` priority for a
    /// lookup that waits, `.probe` for a listing's entries in the background.
    /// With `firstBytes` and a `handover`, a ranged GET asks for that many
    /// bytes (HEAD only if its answer gives no length).
    @discardableResult
    package static func start(url: String, fetcher: Fetching, clock: Clock, priority: FetchRequest.Priority = .read,
                      firstBytes: Int64 = 0, handover: Handover? = nil,
                      completion: @escaping Completion) -> ContentProbe {
        let steps: [Step] = firstBytes > 0 && handover != nil ? [.firstBytes(firstBytes), .head] : [.head, .byteZero]
        let probe = ContentProbe(url: url, fetcher: fetcher, clock: clock, priority: priority, steps: steps, handover: handover, completion: completion)
        probe.send(priority: priority)
        return probe
    }

    private func send(priority: FetchRequest.Priority) {
        let request: FetchRequest
        switch step {
        case .firstBytes(let count):
            Log.debug("GET \(MediaError.redacted(url)) bytes 0-\(count - 1) (probe)")
            request = FetchRequest(url: url, range: 0..<count, priority: priority)
        case .head:
            Log.debug("HEAD \(MediaError.redacted(url))")
            request = FetchRequest(url: url, method: .head, priority: priority)
        case .byteZero:
            Log.debug("GET \(MediaError.redacted(url)) bytes 0-0")
            request = FetchRequest(url: url, range: 0..<1, priority: priority)
        }
        sentAt = clock.monotonic()
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
        self.head = head
        switch step {
        case .head: return true
        case .byteZero: return false
        case .firstBytes:
            // A 416 (an empty file) or an answer without a usable length
            // has no body worth keeping; `complete` judges it.
            guard head.status == 206 || head.status == 200, let handover,
                  let info = Self.info(from: head), info.length > 0 else { return false }
            handedOver = true
            fetcher.statistics?.timings.probeDuration.observe(since: started)
            sink = handover(info, id, head, sentAt)
            return sink != nil
        }
    }

    package func transfer(_ id: TransferID, receiveBody bytes: UnsafeRawBufferPointer) -> Bool {
        sink?.transfer(id, receiveBody: bytes) ?? false
    }

    package func transfer(_ id: TransferID, completeWith error: MediaError?) {
        if handedOver {
            sink?.transfer(id, completeWith: error)
            sink = nil
            return
        }
        if let head, let info = Self.info(from: head) {
            return report(.success(info))
        }
        let failure = head.map(\.failure) ?? MediaError.io(error?.message ?? "no response")
        if let head, failure.errno != ENOENT, !nextSteps.isEmpty {
            Log.debug("\(MediaError.redacted(url)): the probe's \(step) gave HTTP \(head.status)")
            step = nextSteps.removeFirst()
            self.head = nil
            send(priority: .probe)
            return
        }
        report(.failure(failure))
    }

    private func report(_ result: Result<ContentInfo, MediaError>) {
        fetcher.statistics?.timings.probeDuration.observe(since: started)
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
