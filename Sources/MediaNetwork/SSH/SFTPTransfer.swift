// One read of an `sftp://` file through SFTPFetcher: its request, its
// delegate, and what cancel and promote change while it waits or runs.
import MediaSupport
import Synchronization

package final class SFTPTransfer: Sendable {
    package let id: TransferID
    package let request: FetchRequest
    let delegate: TransferDelegate
    /// SFTPSessions' key: the server and login it reads from.
    let server: String
    private let priorityValue: Atomic<Int>
    private let cancelledFlag = Atomic<Bool>(false)

    init(id: TransferID, request: FetchRequest, delegate: TransferDelegate, server: String) {
        self.id = id
        self.request = request
        self.delegate = delegate
        self.server = server
        priorityValue = Atomic(request.priority.rawValue)
    }

    var priority: FetchRequest.Priority {
        FetchRequest.Priority(rawValue: priorityValue.load(ordering: .relaxed)) ?? .read
    }

    /// Raises its priority to `priority` if that is more urgent.
    func promote(to priority: FetchRequest.Priority) {
        _ = priorityValue.min(priority.rawValue, ordering: .relaxed)
    }

    var cancelled: Bool { cancelledFlag.load(ordering: .relaxed) }

    func cancel() { cancelledFlag.store(true, ordering: .relaxed) }
}
