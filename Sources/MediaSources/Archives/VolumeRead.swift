// One bounded ranged GET of an archive volume, kept whole: its bytes and
// what the answer says of the volume (its length from Content-Range, its
// validators). A 206 for exactly the range asked, or a 200 of a body no
// longer than asked (a volume smaller than the head read), is an answer;
// anything else an error naming the volume.
import Foundation
import MediaNetwork
import MediaSupport
import MediaStore

final class VolumeRead: TransferDelegate, Sendable {
    struct Answer: Sendable {
        var bytes: [UInt8]
        /// The volume's length, its ETag and Last-Modified, as answered.
        var length: Int64
        var etag: String?
        var lastModified: String?
    }

    private let range: Range<Int64>
    private let done: @Sendable (Result<Answer, MediaError>) -> Void
    /// The answer so far and what was wrong with it. Touched only on the
    /// fetcher's thread; behind a lock all the same, uncontended, so the
    /// compiler checks what crosses threads.
    private let received = Locked((answer: Answer?.none, problem: MediaError?.none))

    private init(range: Range<Int64>, done: @escaping @Sendable (Result<Answer, MediaError>) -> Void) {
        self.range = range
        self.done = done
    }

    /// GETs `range` of `url` (clipped by the server to the volume's length).
    static func start(url: String, range: Range<Int64>, fetcher: Fetching,
                      done: @escaping @Sendable (Result<Answer, MediaError>) -> Void) -> TransferID {
        fetcher.start(FetchRequest(url: url, range: range, priority: .read),
                      delegate: VolumeRead(range: range, done: done))
    }

    func transfer(_ id: TransferID, receiveHead head: ResponseHead) -> Bool {
        let answered = Self.answer(to: head, for: range)
        received.withLock { received in
            switch answered {
            case .success(let answer): received.answer = answer
            case .failure(let problem): received.problem = problem
            }
        }
        if case .failure = answered { return false }
        return true
    }

    /// The answer `head` starts for `range`, or what is wrong with it.
    private static func answer(to head: ResponseHead, for range: Range<Int64>) -> Result<Answer, MediaError> {
        switch head.status {
        case 206:
            guard let answered = head.contentRange, let total = answered.total, answered.range.lowerBound == range.lowerBound,
                  answered.range.upperBound <= range.upperBound,
                  answered.range.upperBound == range.upperBound || answered.range.upperBound == total else {
                return .failure(MediaError.io("answered \(head.headers["content-range"] ?? "no Content-Range") to bytes "
                                              + "\(range.lowerBound)-\(range.upperBound - 1)"))
            }
            return .success(Answer(bytes: [], length: total, etag: head.etag, lastModified: head.lastModified))
        case 200 where range.lowerBound == 0:
            // The whole volume: only when it is no longer than what was asked.
            guard let length = head.contentLength, length <= range.count else {
                return .failure(MediaError(EOPNOTSUPP, "its server ignores Range; an archive is read by range only"))
            }
            return .success(Answer(bytes: [], length: length, etag: head.etag, lastModified: head.lastModified))
        default:
            return .failure(MediaError(head.failure.errno, "HTTP \(head.status)"))
        }
    }

    func transfer(_ id: TransferID, receiveBody bytes: UnsafeRawBufferPointer) -> Bool {
        let wanted = range.count
        return received.withLock { received in
            // Appended in place: a copy of the answer would copy its bytes each chunk.
            guard received.answer != nil, received.answer!.bytes.count + bytes.count <= wanted else {
                received.problem = MediaError.io("sent more than the \(wanted) bytes asked for")
                return false
            }
            received.answer!.bytes += bytes
            return true
        }
    }

    func transfer(_ id: TransferID, completeWith error: MediaError?) {
        let (answer, problem) = received.withLock { $0 }
        if let problem { return done(.failure(problem)) }
        if let error { return done(.failure(error)) }
        guard let answer else { return done(.failure(MediaError.io("no answer"))) }
        let expected = min(range.upperBound, answer.length) - range.lowerBound
        guard Int64(answer.bytes.count) == expected else {
            return done(.failure(MediaError.io("\(answer.bytes.count) of the \(expected) bytes asked for")))
        }
        done(.success(answer))
    }
}
