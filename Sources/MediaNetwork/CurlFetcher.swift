// Fetching over libcurl's multi interface: one network thread drives every
// transfer, so connections are reused across reads and files. Delegates run
// on that thread and must not block; they only copy bytes into the cache.
// TransferAdmission decides what enters libcurl: per origin, reads shared
// among files in turn, background transfers only in what reads leave, so a
// reader's request always finds a connection soon; memory in flight is
// bounded by transfers running × receive buffer, however many files.
// A transfer's handles, one per redirect hop, come from CurlHop. With
// `--bwlimit`, a transfer whose piece the BandwidthLimit refuses is paused
// from its write callback and resumed by this thread when its share is due.
// A long transfer holds the same way once it delivered what its reader was
// allowed, and gives its connection up when a read of its origin waits.
// libcurl negotiates HTTP/2 over TLS (ALPN); an origin that answered so
// takes many transfers at once as streams of one connection (PIPEWAIT: a
// wave of them waits for that connection instead of opening sixteen).
import CCurl
#if canImport(Glibc)
import Glibc
import MediaSupport
#endif

package final class CurlFetcher: Fetching, @unchecked Sendable {
    /// Transfers running at once per origin (scheme, host, port); more queue here.
    package static let maxConnectionsPerHost = 8
    /// Transfers running at once per origin that speaks HTTP/2: streams of
    /// one connection, within the 100 libcurl and 128 nginx allow at once.
    package static let maxStreamsPerMultiplexedHost = 64
    package static let maxConnections = 16
    /// Readahead and preload transfers running at once; the rest queue.
    package static let maxBackgroundTransfers = 4
    /// The same at origins that speak HTTP/2: a walk through a VOD's parts
    /// keeps 16 heads ahead, each with the page of the part before it.
    package static let maxMultiplexedBackgroundTransfers = 32
    /// Places per origin that probes, readahead and preload leave to reads.
    package static let readReserve = 2
    /// Background probes (a listing's entries) running at once: enough to
    /// fill the connections to one origin, never all of them.
    package static let maxBackgroundProbes = maxConnectionsPerHost - readReserve
    /// A transfer that moves less than one byte in this time has stalled.
    package static let stallSeconds = 20
    package static let connectTimeoutSeconds = 10
    package static let receiveBufferSize = 512 * 1024
    /// A held transfer ends after this long without being let go on: a
    /// reader that stopped reading must not keep a connection (nor meet
    /// the stall limit, or a server's send timeout, on resuming).
    package static let maxHoldSeconds = 10.0

    private struct Pending {
        var starts: [CurlTransfer] = []
        var cancels: [TransferID] = []
        var promotions: [(TransferID, FetchRequest.Priority)] = []
        var allowances: [(TransferID, Int64)] = []
        var nextID: TransferID = 1
        var stopping = false
        /// The network thread has ended and freed the multi: nothing may wake it.
        var multiFreed = false
    }

    private let multi: UnsafeMutableRawPointer
    private let pending = Locked(Pending(), rank: .fetcherPending)
    /// Touched only by the network thread.
    private var active: [TransferID: CurlTransfer] = [:]
    /// Transfers waiting for a place, by id; the order is the admission's.
    private var waiting: [TransferID: CurlTransfer] = [:]
    private let admission = TransferAdmission(
        perOrigin: CurlFetcher.maxConnectionsPerHost, readReserve: CurlFetcher.readReserve,
        maxProbes: CurlFetcher.maxBackgroundProbes, maxBackground: CurlFetcher.maxBackgroundTransfers,
        perMultiplexedOrigin: CurlFetcher.maxStreamsPerMultiplexedHost,
        maxMultiplexedBackground: CurlFetcher.maxMultiplexedBackgroundTransfers)
    private var thread: pthread_t?

    private let options: HTTPOptions
    /// Counts responses by status class; nil in tests that do not look.
    package let statistics: Statistics?
    /// Touched only by the network thread: `--bwlimit`, and
    /// `--background-bwlimit` (background jobs' transfers pass both).
    private let limit: BandwidthLimit?
    private let backgroundLimit: BandwidthLimit?
    /// The mount's clock: the bandwidth limit's refills and the holds of
    /// transfers are timed on its monotonic time.
    private let clock: Clock

    package init(clock: Clock, options: HTTPOptions = HTTPOptions(), statistics: Statistics? = nil,
                limit: BandwidthLimit? = nil, backgroundLimit: BandwidthLimit? = nil, readTimeout: Double = 30) {
        self.clock = clock
        self.options = options
        self.statistics = statistics
        self.limit = limit
        self.backgroundLimit = backgroundLimit
        CurlFetcher.globalInit
        multi = curl_multi_init()!
        // No CURLMOPT_MAX_HOST_CONNECTIONS: libcurl would count by host name
        // (two ports, one queue) and queue in arrival order; the admission
        // counts per origin and in turn. Redirect hops count against the
        // origin of the original URL, so a redirect target shared by two
        // origins may get up to twice the per-origin number.
        _ = mediafs_multi_setopt_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, Self.maxConnections)
        _ = mediafs_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, Self.maxConnections)
        // What the mount's own fetches (its playlists, listings) learned.
        for origin in OriginProtocols.known { admission.learned(origin, multiplexes: true) }
        // A job's read waits for players within the reads' timeout.
        admission.backgroundPatience = TransferAdmission.backgroundPatience(readTimeout: readTimeout)
        var tid = pthread_t()
        let context = Unmanaged.passRetained(self).toOpaque()
        pthread_create(&tid, nil, { arg in
            let fetcher = Unmanaged<CurlFetcher>.fromOpaque(arg!).takeRetainedValue()
            fetcher.run()
            return nil
        }, context)
        thread = tid
    }

    /// curl_global_init is not thread-safe: run it once, lazily.
    private static let globalInit: Void = { curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()

    package static func initializeLibrary() { globalInit }

    /// Stops the network thread; transfers still running complete with an error.
    /// Safe to call again (FUSE's destroy stops the catalog a second time).
    package func shutdown() {
        pending.withLock { $0.stopping = true }
        wake()
        if let thread { pthread_join(thread, nil) }
        thread = nil
    }

    @discardableResult
    package func start(_ request: FetchRequest, delegate: TransferDelegate) -> TransferID {
        let id = pending.withLock { state -> TransferID in
            let id = state.nextID
            state.nextID += 1
            state.starts.append(CurlTransfer(id: id, request: request, delegate: delegate, options: options,
                                             clock: clock, statistics: statistics, limit: limit,
                                             backgroundLimit: backgroundLimit))
            return id
        }
        wake()
        return id
    }

    package func cancel(_ id: TransferID) {
        pending.withLock { $0.cancels.append(id) }
        wake()
    }

    package func promote(_ id: TransferID) {
        promote(id, to: .read)
    }

    package func promote(_ id: TransferID, to priority: FetchRequest.Priority) {
        pending.withLock { $0.promotions.append((id, priority)) }
        wake()
    }

    package func holdsTransfers(of url: String) -> Bool { true }

    /// Wakes the network thread, unless it has ended: its multi is freed
    /// then, and a call after `shutdown` (a second one, a late cancel) woke
    /// freed memory.
    private func wake() {
        pending.withLock { state in
            if !state.multiFreed { curl_multi_wakeup(multi) }
        }
    }

    package func allow(_ id: TransferID, through bytes: Int64) {
        pending.withLock { $0.allowances.append((id, bytes)) }
        wake()
    }

    private func run() {
        while true {
            let (starts, cancels, promotions, allowances, stopping) = pending.withLock { state in
                defer { state.starts = []; state.cancels = []; state.promotions = []; state.allowances = [] }
                return (state.starts, state.cancels, state.promotions, state.allowances, state.stopping)
            }
            if stopping { break }
            for transfer in starts { enqueue(transfer) }
            for (id, priority) in promotions {
                guard let transfer = active[id] ?? waiting[id], priority < transfer.priority else { continue }
                transfer.priority = priority
                admission.promote(id, to: priority)
            }
            for (id, bytes) in allowances {
                guard let transfer = active[id] ?? waiting[id], bytes > transfer.allowance else { continue }
                transfer.allowance = bytes
                transfer.applyPause()
            }
            for id in cancels {
                if let transfer = active[id] {
                    finish(transfer, error: MediaError(ECANCELED, "cancelled"))
                } else if let transfer = waiting.removeValue(forKey: id) {
                    admission.remove(id)
                    transfer.complete(error: MediaError(ECANCELED, "cancelled"))
                }
            }
            endHeld()
            admitQueued()
            yieldToReads()
            resumeThrottled()
            var running: Int32 = 0
            curl_multi_perform(multi, &running)
            // Hand over what this round received, so readers never wait on
            // bytes that sit in a buffer (a slow server's too).
            for transfer in Array(active.values) where !transfer.flush() {
                finish(transfer, error: MediaError(ECANCELED, "stopped by the cache"))
            }
            var left: Int32 = 0
            while let message = curl_multi_info_read(multi, &left) {
                guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
                let code = message.pointee.data.result
                var raw: UnsafeMutableRawPointer?
                _ = mediafs_easy_getinfo_pointer(easy, CURLINFO_PRIVATE, &raw)
                let transfer = Unmanaged<CurlTransfer>.fromOpaque(raw!).takeUnretainedValue()
                if code == CURLE_OK { learnProtocol(of: easy, for: transfer) }
                do {
                    if let next = try transfer.redirect(after: code) {
                        // Out of the multi before the next hop replaces (and frees) the handle.
                        curl_multi_remove_handle(multi, easy)
                        transfer.countResponse(failed: false)
                        curl_multi_add_handle(multi, transfer.attach(next))
                        continue
                    }
                    finish(transfer, error: transfer.error(for: code))
                } catch {
                    finish(transfer, error: error as? MediaError ?? MediaError.io("\(error)"))
                }
            }
            // The places this round freed are filled before the sleep: with
            // nothing left running, nothing would wake the thread until the
            // poll's timeout, a second a round however many transfers wait.
            admitQueued()
            // Again after the round: the sleep that follows must not count as
            // time with these transfers running when none is left.
            limit?.refill(now: clock.monotonic(), running: movingPriorities)
            curl_multi_poll(multi, nil, 0, pollTimeout(), nil)
        }
        for transfer in Array(active.values) + Array(waiting.values) {
            finish(transfer, error: MediaError(ECANCELED, "shutting down"))
        }
        pending.withLock { state in
            state.multiFreed = true
            curl_multi_cleanup(multi)
        }
    }

    private func enqueue(_ transfer: CurlTransfer) {
        waiting[transfer.id] = transfer
        admission.now = clock.monotonic()
        transfer.jobWait = TransferAdmission.JobWait(stalledSince: admission.now)
        admission.enqueue(transfer.id, origin: transfer.origin,
                          group: transfer.request.group, priority: transfer.priority)
    }

    /// Moves into curl what the admission lets start now.
    private func admitQueued() {
        admission.now = clock.monotonic()
        admission.playMoving = active.values.contains {
            ($0.priority == .read || $0.priority == .readahead) && $0.heldSince == nil
        }
        let started = admission.admit()
        if admission.scansDelayed > 0 {
            statistics?.probing.scanReadsDelayed.add(Int64(admission.scansDelayed), ordering: .relaxed)
            admission.scansDelayed = 0
        }
        for id in started {
            guard let transfer = waiting.removeValue(forKey: id) else { continue }
            // Its capacity back once empty (see TransferAdmission.remove).
            if waiting.isEmpty { waiting = [:] }
            admit(transfer)
        }
    }

    /// Tells the admission whether the origin that answered on `easy`
    /// multiplexes (its answer came over HTTP/2 or later).
    private func learnProtocol(of easy: UnsafeMutableRawPointer, for transfer: CurlTransfer) {
        let asked = (url: transfer.request.url, origin: transfer.origin)
        guard let (origin, multiplexes) = OriginProtocols.note(answerOn: easy, asked: asked) else { return }
        admission.learned(origin, multiplexes: multiplexes)
    }

    private func admit(_ transfer: CurlTransfer) {
        do {
            let easy = try transfer.begin()
            if admission.multiplexes(transfer.origin) {
                _ = mediafs_easy_setopt_long(easy, CURLOPT_PIPEWAIT, 1)
            }
            active[transfer.id] = transfer
            curl_multi_add_handle(multi, easy)
        } catch {
            admission.remove(transfer.id)
            transfer.complete(error: error as? MediaError ?? MediaError.io("\(error)"))
        }
    }

    /// Ends held transfers that a read of their origin (or a player's
    /// readahead) waits behind for a place, or that were held too long:
    /// they end at what they delivered.
    private func endHeld() {
        let now = clock.monotonic()
        for transfer in Array(active.values) {
            guard let since = transfer.heldSince else { continue }
            let blocking = admission.waitsForRoom(at: transfer.origin,
                                                  behind: transfer.priority)
            guard blocking || now - since >= Self.maxHoldSeconds else { continue }
            if blocking { statistics?.transfersYielded.add(1, ordering: .relaxed) }
            finish(transfer, error: MediaError(FetchError.yielded,
                                               blocking ? "gave its connection to a waiting read" : "held too long"))
        }
    }

    /// Preload and background jobs' transfers run only while no
    /// read-priority transfer does: they pause
    /// the moment one starts and resumes when none is left. A paused
    /// preload that a reader joined (promoted) resumes at once: left
    /// paused, its reader would wait for bytes that never come. A job's
    /// pauses for at most its patience at a stretch, then moves for a turn
    /// (`TransferAdmission.jobPauses`): beside a player that reads flat out
    /// it would wait for the player's end, and its reader fail at the read
    /// timeout.
    private func yieldToReads() {
        // A held transfer moves nothing: it does not keep preload waiting.
        let reading = active.values.contains { $0.priority == .read && $0.heldSince == nil }
        admission.now = clock.monotonic()
        for transfer in active.values {
            switch transfer.priority {
            case .preload: transfer.yielding = reading
            case .background: transfer.yielding = admission.jobPauses(&transfer.jobWait, reading: reading)
            default: transfer.yielding = false
            }
            transfer.applyPause()
        }
    }

    /// Under `--bwlimit`: adds the share the time since the last round
    /// earned, and resumes paused transfers it now covers, most urgent
    /// first (a resumed one takes its share at once, in `curl_easy_pause`).
    private func resumeThrottled() {
        guard limit != nil || backgroundLimit != nil else { return }
        let now = clock.monotonic()
        let moving = movingPriorities
        limit?.refill(now: now, running: moving)
        backgroundLimit?.refill(now: now, running: moving.intersection([.background]))
        let paused = active.values.filter { $0.throttled && !$0.yielding }
        for transfer in paused.sorted(by: { ($0.priority, $0.id) < ($1.priority, $1.id) })
        where limits(of: transfer.priority).allSatisfy({ $0.mayResume(transfer.priority) }) {
            transfer.throttled = false
            transfer.applyPause()
        }
    }

    /// The buckets a transfer of `priority` draws from.
    private func limits(of priority: FetchRequest.Priority) -> [BandwidthLimit] {
        [limit, priority == .background ? backgroundLimit : nil].compactMap { $0 }
    }

    /// Priorities of the transfers that move bytes (a held one does not:
    /// it takes no share of `--bwlimit`).
    private var movingPriorities: Set<FetchRequest.Priority> {
        Set(active.values.filter { $0.heldSince == nil }.map(\.priority))
    }

    /// How long the thread may sleep: until the next share is due for a
    /// throttled transfer; else libcurl's sockets and wake-ups say when.
    private func pollTimeout() -> Int32 {
        guard limit != nil || backgroundLimit != nil else { return 1000 }
        let waits = active.values.filter { $0.throttled && !$0.yielding }.map { transfer in
            limits(of: transfer.priority).map { $0.wait(for: transfer.priority) }.max() ?? 0
        }
        guard let soonest = waits.min() else { return 1000 }
        return Int32(min(max((soonest * 1000).rounded(.up), 1), 1000))
    }

    private func finish(_ transfer: CurlTransfer, error: MediaError?) {
        transfer.countResponse(failed: error.map { $0.errno != ECANCELED } ?? false)
        if let easy = transfer.easy { curl_multi_remove_handle(multi, easy) }
        _ = transfer.flush()
        transfer.end()
        active[transfer.id] = nil
        admission.remove(transfer.id)
        transfer.complete(error: error)
    }
}

/// One request and its response state, over one CurlHop per redirect;
/// owned by the network thread.
package final class CurlTransfer: @unchecked Sendable {
    package let id: TransferID
    package var priority: FetchRequest.Priority
    /// Whether it may hand over bytes now, and whether libcurl has it paused.
    private var pause: TransferPause
    /// Paused so that reads go first (a preload while reads run).
    package var yielding: Bool {
        get { pause.yielding }
        set { pause.yielding = newValue }
    }
    /// Paused by the write callback: the bandwidth limit refused a piece.
    package var throttled: Bool {
        get { pause.throttled }
        set { pause.throttled = newValue }
    }
    /// Body bytes it may deliver; raised by `allow`.
    package var allowance: Int64 {
        get { pause.allowance }
        set { pause.allowance = newValue }
    }
    /// When it began to hold for its allowance (nil: it does not).
    package var heldSince: Double? { pause.heldSince }
    /// A background job's: how long it has given way to players.
    package var jobWait = TransferAdmission.JobWait(stalledSince: nil)
    /// Whether the current hop's response (or its failure) was counted.
    private var counted = false
    private let statistics: Statistics?
    private let limit: BandwidthLimit?
    private let backgroundLimit: BandwidthLimit?
    package let request: FetchRequest
    /// The request's origin, parsed once on the network thread: admission,
    /// multiplexing and held transfers ask for it at each step, and a
    /// parse is a trip through libcurl's URL API (a listing's probes parsed 3 each).
    package private(set) lazy var origin: HTTPOrigin? = HTTPOrigin(url: request.url)
    private let delegate: TransferDelegate
    private let options: HTTPOptions
    /// nil until admitted into the multi, so queued transfers hold no handle.
    private var hop: CurlHop?
    private var head = ResponseHead(status: 0, headers: [:])
    private var headDelivered = false
    private var stoppedByDelegate = false
    /// Its error text and body buffers, from admission (`begin`) to `end`.
    private var buffers = ReceiveBuffers()

    package init(id: TransferID, request: FetchRequest, delegate: TransferDelegate, options: HTTPOptions,
                clock: Clock, statistics: Statistics? = nil, limit: BandwidthLimit? = nil,
                backgroundLimit: BandwidthLimit? = nil) {
        self.id = id
        self.request = request
        self.delegate = delegate
        self.options = options
        self.statistics = statistics
        self.limit = limit
        self.backgroundLimit = backgroundLimit
        priority = request.priority
        pause = TransferPause(allowance: request.allowance ?? Int64.max, clock: clock)
    }

    deinit { end() }

    /// The handle of the current hop, in the multi while the transfer runs.
    package var easy: UnsafeMutableRawPointer? { hop?.easy }

    /// The first hop's handle, for the multi; the transfer's buffers from here on.
    package func begin() throws -> UnsafeMutableRawPointer {
        let hop = try CurlHop(request, options: options)
        // A HEAD (most probes) has no body to collect.
        buffers.allocate(withBody: request.method != .head)
        return attach(hop)
    }

    /// Frees the handle and the buffers once the transfer is out of the
    /// multi and its bytes were handed over.
    package func end() {
        hop = nil
        buffers.free()
    }

    /// After a hop ended with `code`: the next hop when the response was a
    /// redirect, nil when it is the answer. Throws for a redirect that is
    /// not followed.
    package func redirect(after code: CURLcode) throws -> CurlHop? {
        guard code == CURLE_OK, !stoppedByDelegate else { return nil }
        return try hop?.next()
    }

    /// Makes `next` the current hop (freeing the last one, which must be out
    /// of the multi); returns its handle, for the multi.
    package func attach(_ next: CurlHop) -> UnsafeMutableRawPointer {
        hop = next
        head = ResponseHead(status: 0, headers: [:])
        pause.newHop()
        counted = false
        buffers.clearError()
        let easy = next.easy
        let this = Unmanaged.passUnretained(self).toOpaque()
        _ = mediafs_easy_setopt_pointer(easy, CURLOPT_PRIVATE, this)
        _ = mediafs_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, buffers.errors)
        _ = mediafs_easy_setopt_pointer(easy, CURLOPT_HEADERDATA, this)
        _ = mediafs_easy_setopt_data_cb(easy, CURLOPT_HEADERFUNCTION) { ptr, size, count, user in
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(user!).takeUnretainedValue()
            let length = size * count
            let line = String(decoding: UnsafeRawBufferPointer(start: ptr, count: length), as: UTF8.self)
            transfer.head.add(line: line[...])
            return length
        }
        _ = mediafs_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, this)
        _ = mediafs_easy_setopt_data_cb(easy, CURLOPT_WRITEFUNCTION) { ptr, size, count, user in
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(user!).takeUnretainedValue()
            let length = size * count
            if transfer.mustHold() || transfer.mustWait(for: length) { return Int(CURL_WRITEFUNC_PAUSE) }
            return transfer.receive(UnsafeRawBufferPointer(start: ptr, count: length)) ? length : 0
        }
        return easy
    }

    /// Pauses or resumes the transfer in libcurl to match `yielding` and
    /// `throttled`. Resuming may deliver bytes libcurl kept, at once.
    package func applyPause() {
        // Yielding waits for the body: a transfer paused while its headers
        // arrive can, once resumed, hand over the status line again and not
        // the headers after it (seen as 206 answers without Content-Range).
        // Taken as done before the call: resuming runs the write callback,
        // which may pause again.
        guard let paused = pause.change(headDelivered: headDelivered, inLibcurl: easy != nil), let easy else { return }
        curl_easy_pause(easy, paused ? CURLPAUSE_RECV : CURLPAUSE_CONT)
    }

    /// Whether the transfer delivered all it may (its reader has not asked
    /// for more yet); then libcurl keeps the bytes and it holds until
    /// allowed more. Only the file's body counts (not a redirect's).
    private func mustHold() -> Bool {
        pause.mustHold(headDelivered: headDelivered)
    }

    /// Whether the bandwidth limit refuses `count` more bytes now; then
    /// libcurl keeps them and the transfer stays paused until resumed.
    /// A redirect's or a Digest challenge's body passes: it is not the file's, and is dropped.
    /// A background job's transfer draws from its own bucket first, then the
    /// mount's (refused there, what it took of its own is spent: it runs
    /// slower than its limit, never faster).
    private func mustWait(for count: Int) -> Bool {
        guard headDelivered || hop?.isPassedOn != true else { return false }
        if priority == .background, let backgroundLimit, !backgroundLimit.take(count, priority: priority) {
            pause.throttle()
            return true
        }
        guard let limit, !limit.take(count, priority: priority) else { return false }
        pause.throttle()
        return true
    }

    /// Counts the current hop's response by its status class once, or as
    /// an error when it `failed` without a status. A hop stopped by the
    /// cache before any answer is not counted.
    package func countResponse(failed: Bool) {
        guard !counted, let statistics else { return }
        let status = hop?.status ?? 0
        guard status != 0 || failed else { return }
        counted = true
        statistics.countResponse(Statistics.ResponseClass(status: status))
    }

    private func deliverHead() -> Bool {
        if headDelivered { return true }
        headDelivered = true
        if let status = hop?.status, status != 0 { head.status = status }
        if let hop, hop.readsRemoteFile { head = RemoteFileHead.head(for: request, on: hop.easy) }
        countResponse(failed: false)
        if !delegate.transfer(id, receiveHead: head) {
            stoppedByDelegate = true
            return false
        }
        return true
    }

    private func receive(_ bytes: UnsafeRawBufferPointer) -> Bool {
        // The body of a redirect or a Digest challenge is not the file's.
        if !headDelivered && hop?.isPassedOn == true { return true }
        guard deliverHead(), !stoppedByDelegate else { return false }
        pause.delivered(bytes.count)
        if !buffers.fits(bytes.count) {
            guard flush() else { return false }
        }
        if bytes.count >= CurlFetcher.receiveBufferSize {
            return deliver(bytes)
        }
        return buffers.append(bytes)
    }

    /// Delivers the collected body bytes; false once the delegate said stop.
    package func flush() -> Bool {
        guard !stoppedByDelegate else { return false }
        guard let collected = buffers.take() else { return true }
        return deliver(collected)
    }

    private func deliver(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if !delegate.transfer(id, receiveBody: bytes) {
            stoppedByDelegate = true
            return false
        }
        return true
    }

    package func error(for code: CURLcode) -> MediaError? {
        if stoppedByDelegate { return MediaError(ECANCELED, "stopped by the cache") }
        if code != CURLE_OK {
            let detail = buffers.errorText ?? String(cString: curl_easy_strerror(code))
            if hop?.readsRemoteFile == true { return RemoteFileHead.failure(code, detail: detail) }
            return MediaError(EIO, detail)
        }
        if !deliverHead() { return MediaError(ECANCELED, "stopped by the cache") }
        return nil
    }

    package func complete(error: MediaError?) {
        delegate.transfer(id, completeWith: error)
    }
}
