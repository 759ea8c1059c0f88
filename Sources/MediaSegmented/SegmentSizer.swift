// Learns the lengths of a VOD's parts that its playlist does not give
// (segments without #EXT-X-BYTERANGE): a probe each (HEAD, else a GET of
// byte 0), `maxParallel` at a time, through the mount's fetcher (whose
// admission bounds each origin as it does a listing's probes). A sizing
// that a read waits on asks the parts whose heads that read takes next
// with a ranged GET of their first bytes instead, which tells the length
// as well, and keeps those bytes for it (`SegmentHeads`, decision 0062):
// the same requests, no round trip a segment after them. An AES-128
// part's plain length takes one more request: its last two cipher blocks
// (TailRead), whose last block's padding says how many bytes the plain
// text lacks. Requests wait for the layout here; once settled it never
// changes for this mount.
// A failure fails the waiters of that round; lengths already learned are
// kept, so the next request asks only for the rest.
import Foundation
import MediaNetwork
import MediaStore
import MediaSupport
import MediaSources

final class SegmentSizer: Sendable {
    typealias Done = @Sendable (Result<SegmentedVOD.Layout, MediaError>) -> Void

    /// Probes asked of the fetcher at once for one VOD. Its admission bounds
    /// what runs: 8 per HTTP/1 origin, 64 streams on an HTTP/2 one (a
    /// 2-minute VOD's lengths in one round trip); waiting there costs a
    /// request's few words, so this only bounds a long VOD's queue.
    static let maxParallel = 64
    /// A head kept: the MP4 demuxer reads each moof with one buffer's read
    /// (32 KiB), and so does ffmpeg's first read of a file; through the
    /// page cache that read is 9 pages from the one holding the part's
    /// start, at most 36 KiB of the part.
    static let headBytes = 36 << 10
    /// Parts of one VOD whose heads a sizing keeps (2 MiB of heads); the
    /// walk fetches the heads of later ones itself (`FileLoader+Parts`).
    static let headsPerVOD = 64

    private struct State {
        var lengths: [Int64?]
        var layout: SegmentedVOD.Layout?
        var waiters: [Done] = []
        /// Parts not yet asked for in this round, in order.
        var queue: [Int] = []
        var inFlight = 0
        var failure: MediaError?
        /// This round's probes keep heads: a read waits on it.
        var keepsHeads = false
    }

    let vod: SegmentedVOD
    private let fetcher: Fetching
    /// Where learned lengths are kept for the next mount; nil: nowhere.
    private let store: CacheStore?
    /// Where heads fetched with lengths wait for the read; nil: none kept.
    let heads: SegmentHeads?
    private let state: Locked<State>
    /// The mount's clock, which its probes are timed on.
    private let clock: Clock

    /// The lengths a playlist does not give come from `store` when they
    /// were learned for the same parts before (a VOD's segments do not
    /// change under an unchanged playlist): a remount, with its server
    /// gone or not, lays the file out with no request.
    init(vod: SegmentedVOD, fetcher: Fetching, clock: Clock, store: CacheStore? = nil, heads: SegmentHeads? = nil) {
        self.vod = vod
        self.clock = clock
        self.fetcher = fetcher
        self.store = store
        self.heads = heads
        var initial = State(lengths: vod.parts.map { part in part.encryption == nil ? part.range.map { Int64($0.count) } : nil })
        if let lengths = vod.listedLengths {
            initial.layout = try? vod.layout(lengths: lengths)
        } else if let lengths = store?.loadSegmentLengths(url: vod.url, digest: vod.partsDigest, count: vod.parts.count),
                  let layout = try? vod.layout(lengths: lengths) {
            initial.lengths = lengths.map(Optional.some)
            initial.layout = layout
        }
        state = Locked(initial)
    }

    /// The layout, if settled.
    var layout: SegmentedVOD.Layout? { state.withLock { $0.layout } }

    /// Calls `done` with the layout: at once when it is settled, else on the
    /// fetcher's thread once every length is learned (or one fails).
    /// `forRead`: a read waits (a GET of the file), so a round this starts
    /// keeps the heads it reads next (`takesHead`).
    func whenSized(priority: FetchRequest.Priority, forRead: Bool = false, _ done: @escaping Done) {
        let (layout, toStart, unknown) = state.withLock { state -> (SegmentedVOD.Layout?, [Int], Int) in
            if let layout = state.layout { return (layout, [], 0) }
            state.waiters.append(done)
            guard state.inFlight == 0, state.queue.isEmpty else { return (nil, [], 0) }
            state.failure = nil
            state.keepsHeads = forRead && heads != nil
            state.queue = state.lengths.indices.filter { state.lengths[$0] == nil }
            let unknown = state.queue.count
            return (nil, Self.take(&state), unknown)
        }
        if let layout { return done(.success(layout)) }
        if !toStart.isEmpty { Log.debug("\(vod.displayURL): learning the lengths of \(unknown) segments") }
        for part in toStart { probe(part, priority: priority) }
    }

    /// Takes the next parts to probe off the queue, up to `maxParallel` in flight.
    private static func take(_ state: inout State) -> [Int] {
        var parts: [Int] = []
        while state.inFlight < maxParallel, !state.queue.isEmpty {
            parts.append(state.queue.removeFirst())
            state.inFlight += 1
        }
        return parts
    }

    /// Whether a sizing for a read keeps part `index`'s head: each part of
    /// fragmented MP4 (the demuxer reads every moof, at each segment's
    /// start), else the first (a read's first bytes); the whole resource,
    /// in the clear, among the first `headsPerVOD`; from an origin that
    /// answered over HTTP/1, where the lengths take a round trip per eight
    /// segments whose links carry the heads for nothing. An HTTP/2 origin
    /// answers every HEAD in one round trip, and the heads would only put
    /// their bytes before the reads' (a player's first 3 s, 1.56 → 1.88 s).
    func takesHead(_ index: Int) -> Bool {
        let part = vod.parts[index]
        return part.range == nil && part.encryption == nil && !vod.isArchiveMember && index < Self.headsPerVOD
            && (index == 0 || vod.contentType == "video/mp4") && !OriginProtocols.multiplexes(part.url)
    }

    private func probe(_ part: Int, priority: FetchRequest.Priority) {
        let (url, range) = (vod.parts[part].url, vod.parts[part].range)
        if let range {
            return plainLength(of: part, cipher: Int64(range.count), priority: priority)
        }
        if let heads, state.withLock({ $0.keepsHeads }), takesHead(part) {
            return HeadRead.start(url: url, count: Self.headBytes, priority: priority, fetcher: fetcher) { [self] result in
                guard case .success(let answer) = result else {
                    // Asked as before: a HEAD names what is wrong as a stat would.
                    return probeLength(part, priority: priority)
                }
                heads.keep(url: url, length: answer.length, bytes: answer.head)
                learned(part, .success(answer.length), priority: priority)
            }
        }
        probeLength(part, priority: priority)
    }

    /// The length of part `part`, a whole resource, by a probe of its head.
    private func probeLength(_ part: Int, priority: FetchRequest.Priority) {
        let url = vod.parts[part].url
        ContentProbe.start(url: url, fetcher: fetcher, clock: clock, priority: priority) { [self] result in
            guard case .success(let info) = result, vod.parts[part].encryption != nil else {
                return learned(part, result.map(\.length), priority: priority)
            }
            plainLength(of: part, cipher: info.length, priority: priority)
        }
    }

    /// The plain length of part `index`, `cipher` bytes of AES-128 cipher
    /// text: its last block decrypted with the one before it (or the IV).
    private func plainLength(of index: Int, cipher: Int64, priority: FetchRequest.Priority) {
        let part = vod.parts[index]
        guard let encryption = part.encryption else { return learned(index, .success(cipher), priority: priority) }
        guard let key = vod.keys[encryption.keyURL] else {
            return learned(index, .failure(MediaError(ENOKEY, "its key \(MediaError.redacted(encryption.keyURL)) could not be fetched")),
                           priority: priority)
        }
        let block = Int64(AES128CBC.blockSize)
        guard cipher >= block, cipher % block == 0 else {
            return learned(index, .failure(MediaError.io("\(cipher) bytes of cipher text is not a whole number of AES blocks")),
                           priority: priority)
        }
        let start = part.range?.lowerBound ?? 0
        let tail = (start + max(cipher - 2 * block, 0))..<(start + cipher)
        TailRead.start(url: part.url, range: tail, total: part.range == nil ? cipher : nil, priority: priority,
                       fetcher: fetcher) { [self] result in
            learned(index, result.flatMap { bytes in
                let previous = bytes.count == 2 * AES128CBC.blockSize ? Array(bytes.prefix(AES128CBC.blockSize)) : encryption.iv
                guard let plain = AES128CBC.plainLength(cipherLength: cipher, previous: previous,
                                                        last: Array(bytes.suffix(AES128CBC.blockSize)), key: key) else {
                    return .failure(MediaError.io("its last block has no PKCS#7 padding under its key (wrong key or IV?)"))
                }
                return .success(plain)
            }, priority: priority)
        }
    }

    private func learned(_ part: Int, _ result: Result<Int64, MediaError>, priority: FetchRequest.Priority) {
        let (next, finished) = state.withLock { state -> ([Int], (Result<SegmentedVOD.Layout, MediaError>, [Done])?) in
            state.inFlight -= 1
            switch result {
            case .success(let length): state.lengths[part] = length
            case .failure(let error):
                state.failure = state.failure ?? MediaError(error.errno, "segment \(part + 1) (\(MediaError.redacted(vod.parts[part].url))): \(error.message)")
                state.queue = []
            }
            let next = Self.take(&state)
            guard state.inFlight == 0, state.queue.isEmpty else { return (next, nil) }
            let waiters = state.waiters
            state.waiters = []
            if let failure = state.failure { return (next, (.failure(failure), waiters)) }
            do {
                let layout = try vod.layout(lengths: state.lengths.map { $0 ?? 0 })
                state.layout = layout
                return (next, (.success(layout), waiters))
            } catch let error as MediaError {
                return (next, (.failure(error), waiters))
            } catch {
                return (next, (.failure(MediaError.io("\(error)")), waiters))
            }
        }
        for part in next { probe(part, priority: priority) }
        if let (result, waiters) = finished {
            switch result {
            case .failure(let error): Log.error("\(vod.displayURL): \(error.message)")
            case .success(let layout): keep(layout)
            }
            for waiter in waiters { waiter(result) }
        }
    }

    /// Saves learned lengths for the next mount (a small file, once per
    /// VOD and mount); a failure costs the next mount its probes only.
    private func keep(_ layout: SegmentedVOD.Layout) {
        guard let store, vod.listedLengths == nil else { return }
        let lengths = zip(layout.offsets, layout.offsets.dropFirst()).map { $1 - $0 }
        do {
            try store.saveSegmentLengths(url: vod.url, digest: vod.partsDigest, lengths: lengths)
        } catch {
            Log.warning("\(vod.displayURL): \((error as? MediaError)?.message ?? "\(error)"); the next mount learns its lengths again")
        }
    }
}
