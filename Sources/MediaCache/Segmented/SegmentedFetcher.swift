// The Fetching seam, with segmented VODs in it: a request for a VOD's URL
// becomes a SegmentedTransfer (ranged requests on the segments it covers,
// answered as one response of one file); any other request goes to the
// fetcher beneath unchanged. The loader, the cache, single-flight,
// readahead, limits, purge, pin, xattrs and status so need to know nothing
// of segments.
//
// Its own transfers' IDs have the top bit set, the fetcher beneath counts
// from 1: a cancel or promote goes to whichever owns the ID.
import MediaNetwork
import MediaSupport

public final class SegmentedFetcher: Fetching, Sendable {
    private static let ownBit: TransferID = 1 << 63

    private let base: Fetching
    /// By URL; fixed at mount.
    private let sizers: [String: SegmentSizer]
    private let transfers = Locked<(next: TransferID, running: [TransferID: SegmentedTransfer])>((ownBit, [:]))
    /// Answers made up without a request (a HEAD, a 416): off the caller's
    /// thread, as the fetcher beneath answers.
    private let answers = Worker(name: "mediafs-vod")

    public init(base: Fetching, vods: [SegmentedVOD]) {
        self.base = base
        var sizers: [String: SegmentSizer] = [:]
        for vod in vods { sizers[vod.url] = SegmentSizer(vod: vod, fetcher: base) }
        self.sizers = sizers
    }

    public var statistics: Statistics? { base.statistics }

    @discardableResult
    public func start(_ request: FetchRequest, delegate: TransferDelegate) -> TransferID {
        guard let sizer = sizers[request.url] else { return base.start(request, delegate: delegate) }
        let answers = self.answers
        let transfer = transfers.withLock { state -> SegmentedTransfer in
            let id = state.next
            state.next += 1
            let transfer = SegmentedTransfer(
                id: id, request: request, delegate: delegate, sizer: sizer, fetcher: base,
                // Past shutdown nothing waits on an answer any more.
                answerLater: { job in answers.submit(job) },
                finished: { [weak self] id in self?.transfers.withLock { _ = $0.running.removeValue(forKey: id) } })
            state.running[id] = transfer
            return transfer
        }
        transfer.start()
        return transfer.id
    }

    public func cancel(_ id: TransferID) {
        guard id & Self.ownBit != 0 else { return base.cancel(id) }
        transfers.withLock { $0.running[id] }?.cancel()
    }

    public func promote(_ id: TransferID) {
        promote(id, to: .read)
    }

    /// Passed on whole to the mount's fetcher (a scan joining a preload
    /// raises it only to `.scan`); a VOD's own transfer follows a read.
    public func promote(_ id: TransferID, to priority: FetchRequest.Priority) {
        guard id & Self.ownBit != 0 else { return base.promote(id, to: priority) }
        if priority == .read { transfers.withLock { $0.running[id] }?.promote() }
    }

    /// A VOD's transfers are cut into segments' requests, never held; other
    /// files' are the fetcher beneath's.
    public func holdsTransfers(of url: String) -> Bool {
        sizers[url] == nil && base.holdsTransfers(of: url)
    }

    /// A VOD's parts' offsets once its sizer settled them; never before
    /// (asking does not start the sizing).
    public func partOffsets(of url: String) -> [Int64]? {
        sizers[url]?.layout?.offsets
    }

    public func allow(_ id: TransferID, through bytes: Int64) {
        guard id & Self.ownBit == 0 else { return }
        base.allow(id, through: bytes)
    }

    public func shutdown() {
        base.shutdown()
        answers.stop(drain: true)
    }
}
