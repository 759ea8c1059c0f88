// One ranged GET of a segment's first bytes that learns its length too
// (decision 0062): `bytes=0-N` is answered 206 with the whole length in
// Content-Range, so a sizing that a read waits on brings the heads that
// read asks for next in the requests it makes anyway. A server that
// ignores Range answers 200: its Content-Length is the length, and the
// body is cut after the bytes asked for. An answer that gives no length,
// or not these bytes, is a failure; the sizer then asks as before.
import MediaNetwork
import MediaSupport
import Foundation

final class HeadRead: TransferDelegate, Sendable {
    typealias Done = @Sendable (Result<(length: Int64, head: [UInt8]), MediaError>) -> Void

    private let count: Int
    private let done: Done
    /// Touched only on the fetcher's thread; behind a lock all the same,
    /// uncontended, so the compiler checks what crosses threads.
    private let received = Locked((length: Int64?.none, bytes: [UInt8](), problem: MediaError?.none))

    private init(count: Int, done: @escaping Done) {
        self.count = count
        self.done = done
    }

    /// GETs the first `count` bytes of the resource at `url`.
    static func start(url: String, count: Int, priority: FetchRequest.Priority, fetcher: Fetching,
                      done: @escaping Done) {
        Log.debug("GET \(MediaError.redacted(url)) bytes 0-\(count - 1) (a segment's length and head)")
        fetcher.start(FetchRequest(url: url, range: 0..<Int64(count), priority: priority),
                      delegate: HeadRead(count: count, done: done))
    }

    func transfer(_ id: TransferID, receiveHead head: ResponseHead) -> Bool {
        let length: Int64?
        switch head.status {
        case 206:
            let answered = head.contentRange
            length = answered?.range.lowerBound == 0 ? answered?.total : nil
        case 200:
            length = head.contentLength
        default:
            received.withLock { $0.problem = MediaError(head.failure.errno, "HTTP \(head.status)") }
            return false
        }
        guard let length else {
            received.withLock { $0.problem = MediaError.io("no length in its answer to bytes 0-\(count - 1)") }
            return false
        }
        received.withLock { $0.length = length }
        return true
    }

    func transfer(_ id: TransferID, receiveBody bytes: UnsafeRawBufferPointer) -> Bool {
        received.withLock { received in
            let take = min(bytes.count, count - received.bytes.count)
            received.bytes += bytes.prefix(take)
            // A 206 ends where asked and keeps its connection; a 200's
            // rest is not wanted.
            return take == bytes.count
        }
    }

    func transfer(_ id: TransferID, completeWith error: MediaError?) {
        let (length, bytes, problem) = received.withLock { $0 }
        if let problem { return done(.failure(problem)) }
        guard let length else { return done(.failure(error ?? MediaError.io("no answer"))) }
        let expected = Int(min(Int64(count), length))
        // Stopped here once the head was whole: the error is that stop's.
        if bytes.count == expected { return done(.success((length, bytes))) }
        done(.failure(error ?? MediaError.io("\(bytes.count) of the \(expected) bytes asked for")))
    }
}
