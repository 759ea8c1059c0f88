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
import MediaStore
import MediaSupport
import Foundation
import MediaSources

package final class SegmentedFetcher: Fetching, Sendable {
    private static let ownBit: TransferID = 1 << 63

    private let base: Fetching
    /// By URL: the mount's own VODs, and those its listings find (a
    /// refresh registers each again; see `register`).
    private let sizers: Locked<[String: SegmentSizer]>
    private let transfers = Locked<(next: TransferID, running: [TransferID: SegmentedTransfer])>((ownBit, [:]))
    /// Answers made up without a request (a HEAD, a 416): off the caller's
    /// thread, as the fetcher beneath answers.
    private let answers = Worker(name: "mediafs-vod")

    /// Where the VODs' segment lengths are kept between mounts; nil: nowhere.
    private let store: CacheStore?
    /// The mount's clock: the sizers' probes are timed on it.
    private let clock: Clock
    /// Heads the sizers fetched with lengths, for the reads that take them.
    private let heads: SegmentHeads

    package init(clock: Clock, base: Fetching, vods: [SegmentedVOD], store: CacheStore? = nil) {
        self.base = base
        self.store = store
        self.clock = clock
        let heads = SegmentHeads(clock: clock)
        self.heads = heads
        var sizers: [String: SegmentSizer] = [:]
        for vod in vods { sizers[vod.url] = SegmentSizer(vod: vod, fetcher: base, clock: clock, store: store, heads: heads) }
        self.sizers = Locked(sizers)
    }

    /// Serves `vod`'s URL from its parts from now on. A VOD already served
    /// with the same parts keeps its sizer (and the lengths it learned);
    /// one whose parts changed gets a new one: its layout, and so its
    /// validator, is then another version's, which the cache's own
    /// validation takes care of. Transfers under way keep the sizer they
    /// started with. One of the same parts that holds keys the served one
    /// lacked (read from saved documents while its server was down)
    /// replaces it too: the same version, now readable.
    @discardableResult
    package func register(_ vod: SegmentedVOD) -> Registration {
        let (base, store, clock, heads) = (self.base, self.store, self.clock, self.heads)
        return sizers.withLock { sizers in
            let known = sizers[vod.url]
            if let known, known.vod.partsDigest == vod.partsDigest {
                guard known.vod.keys.count < vod.keys.count else { return .unchanged }
                sizers[vod.url] = SegmentSizer(vod: vod, fetcher: base, clock: clock, store: store, heads: heads)
                return .keysArrived
            }
            sizers[vod.url] = SegmentSizer(vod: vod, fetcher: base, clock: clock, store: store, heads: heads)
            return known == nil ? .new : .replaced
        }
    }

    /// What registering a VOD did.
    package enum Registration: Sendable {
        /// Served from now on, as none was under its URL.
        case new
        /// The same parts as served: nothing done.
        case unchanged
        /// Another version (other parts) replaced the one served.
        case replaced
        /// The same version, with the keys the one served lacked.
        case keysArrived
    }

    /// Whether `url` is a VOD's, served from its parts.
    package func serves(_ url: String) -> Bool {
        sizer(of: url) != nil
    }

    /// Whether a read of `url` now would size a VOD that keeps heads for
    /// it (`SegmentSizer.takesHead` of its first part): a lookup by a
    /// process that reads next then asks its first bytes (decision 0062).
    package func sizingKeepsHeads(of url: String) -> Bool {
        guard let sizer = sizer(of: url), sizer.layout == nil, !sizer.vod.parts.isEmpty else { return false }
        return sizer.takesHead(0)
    }

    /// Whether `url` is an archive member's, served from its volumes.
    package func isArchiveMember(_ url: String) -> Bool {
        sizer(of: url)?.vod.isArchiveMember ?? false
    }

    private func sizer(of url: String) -> SegmentSizer? {
        sizers.withLock { $0[url] }
    }

    package var statistics: Statistics? { base.statistics }

    /// Bytes of segments' heads kept for reads now (decision 0062).
    package var keptHeadBytes: Int { heads.keptBytes }

    @discardableResult
    package func start(_ request: FetchRequest, delegate: TransferDelegate) -> TransferID {
        guard let sizer = sizer(of: request.url) else { return base.start(request, delegate: delegate) }
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

    package func cancel(_ id: TransferID) {
        guard id & Self.ownBit != 0 else { return base.cancel(id) }
        transfers.withLock { $0.running[id] }?.cancel()
    }

    package func promote(_ id: TransferID) {
        promote(id, to: .read)
    }

    /// Passed on whole to the mount's fetcher (a scan joining a preload
    /// raises it only to `.scan`); a VOD's own transfer follows a read.
    package func promote(_ id: TransferID, to priority: FetchRequest.Priority) {
        guard id & Self.ownBit != 0 else { return base.promote(id, to: priority) }
        if priority == .read { transfers.withLock { $0.running[id] }?.promote() }
    }

    /// An archive member's transfers are held piece by piece (its volumes
    /// are large: a player's long transfer is one request a volume); an
    /// HLS or DASH VOD's are cut into segments' requests, never held; other
    /// files' are the fetcher beneath's.
    package func holdsTransfers(of url: String) -> Bool {
        guard let sizer = sizer(of: url) else { return base.holdsTransfers(of: url) }
        return sizer.vod.isArchiveMember && sizer.vod.parts.allSatisfy { $0.encryption == nil }
            && (sizer.vod.parts.first.map { base.holdsTransfers(of: $0.url) } ?? false)
    }

    /// A VOD's parts' offsets once its sizer settled them; never before
    /// (asking does not start the sizing).
    package func partOffsets(of url: String) -> [Int64]? {
        sizer(of: url)?.layout?.offsets
    }

    package func allow(_ id: TransferID, through bytes: Int64) {
        guard id & Self.ownBit != 0 else { return base.allow(id, through: bytes) }
        transfers.withLock { $0.running[id] }?.allow(through: bytes)
    }

    package func shutdown() {
        // A held transfer waiting for its next piece has no request that
        // the fetcher beneath would end.
        for transfer in transfers.withLock({ Array($0.running.values) }) { transfer.cancel() }
        base.shutdown()
        answers.stop(drain: true)
    }
}
