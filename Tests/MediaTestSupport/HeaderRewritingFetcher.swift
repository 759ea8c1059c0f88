// A FakeFetcher whose response heads pass through a rewrite first, so a test
// can make an otherwise honest server send one hostile header. Bodies and
// completions go through untouched.
import MediaNetwork
import MediaSupport

final class HeaderRewritingFetcher: Fetching, @unchecked Sendable {
    typealias Rewrite = @Sendable (FetchRequest, ResponseHead) -> ResponseHead

    let inner: FakeFetcher
    private let rewrite: Rewrite

    init(_ inner: FakeFetcher, rewrite: @escaping Rewrite) {
        self.inner = inner
        self.rewrite = rewrite
    }

    @discardableResult
    func start(_ request: FetchRequest, delegate: TransferDelegate) -> TransferID {
        inner.start(request, delegate: Relay(request: request, delegate: delegate, rewrite: rewrite))
    }

    func cancel(_ id: TransferID) { inner.cancel(id) }
    func promote(_ id: TransferID) { inner.promote(id) }
    func shutdown() { inner.shutdown() }

    private final class Relay: TransferDelegate, @unchecked Sendable {
        let request: FetchRequest
        let delegate: TransferDelegate
        let rewrite: Rewrite

        init(request: FetchRequest, delegate: TransferDelegate, rewrite: @escaping Rewrite) {
            self.request = request
            self.delegate = delegate
            self.rewrite = rewrite
        }

        func transfer(_ id: TransferID, receiveHead head: ResponseHead) -> Bool {
            delegate.transfer(id, receiveHead: rewrite(request, head))
        }

        func transfer(_ id: TransferID, receiveBody bytes: UnsafeRawBufferPointer) -> Bool {
            delegate.transfer(id, receiveBody: bytes)
        }

        func transfer(_ id: TransferID, completeWith error: MediaError?) {
            delegate.transfer(id, completeWith: error)
        }
    }
}
