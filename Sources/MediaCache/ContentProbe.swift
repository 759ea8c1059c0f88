// Learns a URL's ContentInfo: HEAD first; where HEAD fails or gives no
// length, GET with `Range: bytes=0-0` (stopped after the head). A server
// that cannot be reached gets no second try here. Runs on the fetcher's
// thread and reports once, and how long it took to the fetcher's statistics.
#if canImport(Glibc)
import Glibc
#endif

final class ContentProbe: TransferDelegate, @unchecked Sendable {
    typealias Completion = @Sendable (Result<ContentInfo, MediaError>) -> Void

    private let url: String
    private let fetcher: Fetching
    private let completion: Completion
    /// Touched only on the fetcher's thread.
    private var head: ResponseHead?
    private var usingGet = false
    /// The running request and its priority; a lookup waiting on a
    /// background probe makes it a read (`promote`).
    private let current: Locked<(id: TransferID, priority: FetchRequest.Priority)>
    private let started = Histogram.now()

    private init(url: String, fetcher: Fetching, priority: FetchRequest.Priority, completion: @escaping Completion) {
        self.url = url
        self.fetcher = fetcher
        self.completion = completion
        current = Locked((0, priority))
    }

    /// Starts learning `url`'s ContentInfo: at `.read` priority for a
    /// lookup that waits, `.probe` for a listing's entries in the background.
    @discardableResult
    static func start(url: String, fetcher: Fetching, priority: FetchRequest.Priority = .read,
                      completion: @escaping Completion) -> ContentProbe {
        let probe = ContentProbe(url: url, fetcher: fetcher, priority: priority, completion: completion)
        Log.debug("HEAD \(MediaError.redacted(url))")
        probe.send(FetchRequest(url: url, method: .head, priority: priority))
        return probe
    }

    private func send(_ request: FetchRequest) {
        current.withLock { current in
            current.priority = min(current.priority, request.priority)
            var request = request
            request.priority = current.priority
            current.id = fetcher.start(request, delegate: self)
        }
    }

    /// A lookup now waits on this probe: it jumps the background queue.
    func promote() {
        current.withLock { current in
            guard current.priority != .read else { return }
            current.priority = .read
            fetcher.promote(current.id)
        }
    }

    func transfer(_ id: TransferID, receiveHead head: ResponseHead) -> Bool {
        self.head = head
        return !usingGet
    }

    func transfer(_ id: TransferID, receiveBody bytes: UnsafeRawBufferPointer) -> Bool { false }

    func transfer(_ id: TransferID, completeWith error: MediaError?) {
        if let head, let info = Self.info(from: head) {
            return report(.success(info))
        }
        let failure = head.map(Self.error(for:)) ?? MediaError.io(error?.message ?? "no response")
        if !usingGet && head != nil && failure.errno != ENOENT {
            Log.debug("GET \(MediaError.redacted(url)) bytes 0-0 (HEAD gave HTTP \(head?.status ?? 0))")
            usingGet = true
            head = nil
            send(FetchRequest(url: url, range: 0..<1, priority: .probe))
            return
        }
        report(.failure(failure))
    }

    private func report(_ result: Result<ContentInfo, MediaError>) {
        fetcher.statistics?.probeDuration.observe(since: started)
        completion(result)
    }

    static func info(from head: ResponseHead) -> ContentInfo? {
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

    /// The errno a reader gets for an HTTP failure status.
    static func error(for head: ResponseHead) -> MediaError {
        switch head.status {
        case 404, 410: return MediaError(ENOENT, "HTTP \(head.status)")
        case 401, 403: return MediaError(EACCES, "HTTP \(head.status)")
        case 200..<300:
            // The server's own words, shortened, so the log line shows which header was unusable.
            let said = ["content-length", "content-range"].compactMap { name in
                head.headers[name].map { "\(name) '\($0.prefix(80))'" }
            }
            return MediaError.io("HTTP \(head.status) without a usable length"
                                 + (said.isEmpty ? "" : " (\(said.joined(separator: ", ")))"))
        default: return MediaError.io("HTTP \(head.status)")
        }
    }
}
