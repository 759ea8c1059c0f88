// One small ranged GET whose body is kept: the last two cipher blocks of an
// AES-128 segment (32 bytes), from which its plain length follows. The
// answer must be a 206 for exactly those bytes, within the length already
// learned; anything else is reported as an error naming the segment.
import MediaNetwork
import MediaSupport
import Foundation
import MediaStore
import MediaSources

final class TailRead: TransferDelegate, Sendable {
    typealias Done = @Sendable (Result<[UInt8], MediaError>) -> Void

    private let range: Range<Int64>
    private let total: Int64?
    private let done: Done
    /// The body so far and what was wrong with the answer. Touched only on
    /// the fetcher's thread; behind a lock all the same, uncontended, so
    /// the compiler checks what crosses threads.
    private let received = Locked((bytes: [UInt8](), problem: MediaError?.none))

    private init(range: Range<Int64>, total: Int64?, done: @escaping Done) {
        self.range = range
        self.total = total
        self.done = done
    }

    /// GETs `range` of `url` (whose length is `total` when the resource is
    /// the part, nil when the part is a byte range of it).
    static func start(url: String, range: Range<Int64>, total: Int64?, priority: FetchRequest.Priority,
                      fetcher: Fetching, done: @escaping Done) {
        Log.debug("GET \(MediaError.redacted(url)) bytes \(range.lowerBound)-\(range.upperBound - 1) (cipher tail)")
        fetcher.start(FetchRequest(url: url, range: range, priority: priority),
                      delegate: TailRead(range: range, total: total, done: done))
    }

    func transfer(_ id: TransferID, receiveHead head: ResponseHead) -> Bool {
        guard head.status == 206, let answered = head.contentRange, answered.range == range,
              total == nil || answered.total == total else {
            let problem = head.status == 206 || head.status == 200
                ? MediaError.io("answered \(head.headers["content-range"] ?? "no Content-Range") to bytes "
                                + "\(range.lowerBound)-\(range.upperBound - 1) (it changed?)")
                : MediaError(head.failure.errno, "HTTP \(head.status)")
            received.withLock { $0.problem = problem }
            return false
        }
        return true
    }

    func transfer(_ id: TransferID, receiveBody bytes: UnsafeRawBufferPointer) -> Bool {
        let wanted = range.count
        return received.withLock { received in
            guard received.bytes.count + bytes.count <= wanted else {
                received.problem = MediaError.io("sent more than the \(wanted) bytes asked for")
                return false
            }
            received.bytes += bytes
            return true
        }
    }

    func transfer(_ id: TransferID, completeWith error: MediaError?) {
        let (bytes, problem) = received.withLock { $0 }
        if let problem { return done(.failure(problem)) }
        if let error { return done(.failure(error)) }
        guard bytes.count == range.count else {
            return done(.failure(MediaError.io("\(bytes.count) of the \(range.count) bytes asked for")))
        }
        done(.success(bytes))
    }
}
