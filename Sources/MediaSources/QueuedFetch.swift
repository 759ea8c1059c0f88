// One small request sent through the mount's fetcher rather than on its
// own connection (TextFetch), so the fetcher's admission places it: a
// change poll (decision 0049) goes at the lowest priority, behind every
// reader, scan and preload of its origin, and pauses while a read moves
// bytes. The caller's thread waits for the whole answer, bounded by a
// deadline (the transfer is then cancelled) and by `maxBytes`.
import Foundation
import MediaNetwork
import MediaSupport

package final class QueuedFetch: TransferDelegate, Sendable {
    private struct Received {
        var head: ResponseHead?
        var body = Data()
        var tooLarge = false
    }

    private let maxBytes: Int
    private let url: String
    private let fetcher: Fetching
    /// Written on the fetcher's thread, read by the waiter once `done`: a
    /// leaf, uncontended.
    private let received = Locked(Received())
    private let done = OneShot<MediaError?>()
    private let id = Locked<TransferID>(0)

    /// Sends `request` through `fetcher`; `answer` waits for it.
    package init(_ request: FetchRequest, through fetcher: Fetching, maxBytes: Int) {
        self.maxBytes = maxBytes
        self.fetcher = fetcher
        url = MediaError.redacted(request.url)
        let started = fetcher.start(request, delegate: self)
        id.withLock { $0 = started }
    }

    /// Ends the request: `answer` throws ECANCELED.
    package func cancel() {
        fetcher.cancel(id.withLock { $0 })
    }

    /// The answer (its final hop's status, headers and body), or a
    /// MediaError naming the URL: none by `deadline` (the request is then
    /// cancelled), a body over `maxBytes`, a transfer that failed.
    package func answer(until deadline: Deadline) throws -> TextFetch.Answer {
        guard let outcome = done.wait(until: deadline) else {
            cancel()
            throw MediaError(ETIMEDOUT, "\(url): no answer in time")
        }
        let received = self.received.withLock { $0 }
        if received.tooLarge { throw MediaError(EFBIG, "\(url): an answer larger than \(maxBytes) bytes") }
        if let outcome { throw MediaError(outcome.errno, "\(url): \(outcome.message)") }
        guard let head = received.head else { throw MediaError.io("\(url): no answer") }
        return TextFetch.Answer(status: head.status, body: received.body, headers: head.headers)
    }

    package func transfer(_ id: TransferID, receiveHead head: ResponseHead) -> Bool {
        received.withLock { $0.head = head }
        return true
    }

    package func transfer(_ id: TransferID, receiveBody bytes: UnsafeRawBufferPointer) -> Bool {
        received.withLock { received in
            guard received.body.count + bytes.count <= maxBytes else {
                received.tooLarge = true
                return false
            }
            received.body.append(contentsOf: bytes)
            return true
        }
    }

    package func transfer(_ id: TransferID, completeWith error: MediaError?) {
        _ = done.fulfil(error)
    }
}
