// One small ranged GET whose body is kept: the last two cipher blocks of an
// AES-128 segment (32 bytes), from which its plain length follows. The
// answer must be a 206 for exactly those bytes, within the length already
// learned; anything else is reported as an error naming the segment.
import MediaNetwork
import MediaSupport
import Foundation
import MediaStore
import MediaSources

final class TailRead: TransferDelegate, @unchecked Sendable {
    typealias Done = @Sendable (Result<[UInt8], MediaError>) -> Void

    private let range: Range<Int64>
    private let total: Int64?
    private let done: Done
    /// Touched only on the fetcher's thread.
    private var bytes: [UInt8] = []
    private var problem: MediaError?

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
            problem = head.status == 206 || head.status == 200
                ? MediaError.io("answered \(head.headers["content-range"] ?? "no Content-Range") to bytes "
                                + "\(range.lowerBound)-\(range.upperBound - 1) (it changed?)")
                : MediaError(head.failure.errno, "HTTP \(head.status)")
            return false
        }
        return true
    }

    func transfer(_ id: TransferID, receiveBody bytes: UnsafeRawBufferPointer) -> Bool {
        guard self.bytes.count + bytes.count <= range.count else {
            problem = MediaError.io("sent more than the \(range.count) bytes asked for")
            return false
        }
        self.bytes += bytes
        return true
    }

    func transfer(_ id: TransferID, completeWith error: MediaError?) {
        if let problem { return done(.failure(problem)) }
        if let error { return done(.failure(error)) }
        guard bytes.count == range.count else {
            return done(.failure(MediaError.io("\(bytes.count) of the \(range.count) bytes asked for")))
        }
        done(.success(bytes))
    }
}
