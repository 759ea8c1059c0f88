// The cache-or-fetch manager of one remote file: which bytes are on disk,
// which transfers are filling the rest, and the readers waiting on them.
// Reads are served from the sparse data file; holes are fetched with Range
// requests whose bytes land in the file as they arrive and wake waiters.
//
// Locks, in the order they are taken: `flushLock` (one metadata save or one
// freeing at a time), then `lock` (a ConditionLocked holding every mutable
// thing the loader knows, its LoaderState: reachable only inside its
// `withLock` and `withScope`), then those it calls into with `lock` held:
// the fetcher's, the open data files' table, the cache budget's. `lock` is
// never held across a pread, a pwrite, an fsync or a wait for the network.
// Helpers that need the lock take the state `inout`; the fetcher's
// callbacks (FileLoader+Transfers.swift) and freeing (FileLoader+Freeing.swift)
// reach it the same way.
//
// Invariant: a byte in `present`, or in the metadata on disk, is in the data
// file on disk. Freeing bytes therefore goes: unclaim them and mark them
// doomed (no write lands or is claimed there from then on), drain the
// reads and writes using them, persist metadata without them, and only
// then punch or truncate (FileLoader+Freeing.swift).
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

public final class FileLoader: TransferDelegate, Sendable {
    typealias Transfer = LoaderState.Transfer

    /// How long a failure to open the data file goes unsaid after it was said.
    static let openFailureQuiet: Double = 10

    /// How long a read that must fetch waits for the evictor to make room.
    static let roomWait: Double = 2

    /// How far ahead of a stream read from the cache the disk is asked to read.
    static let diskReadahead: Int64 = 8 << 20
    /// How far at least a long transfer's hold moves when its reader reads on.
    static let holdStep: Int64 = 256 << 10

    public let source: Source
    /// What the mount's loaders share.
    let context: LoaderContext
    var store: CacheStore { context.store }
    var fetcher: Fetching { context.fetcher }
    var settings: LoaderSettings { context.settings }
    var statistics: Statistics { context.statistics }
    /// Room under the cache limits; nil: unlimited.
    var budget: CacheBudget? { context.budget }
    /// The mount's table of open data files (a few hundred at most).
    var openFiles: OpenDataFiles { context.openFiles }
    /// The owner of preload transfers, as a handle owns its readahead.
    var preloadOwner: ObjectIdentifier { ObjectIdentifier(self) }
    /// Whose identity owns the container lookahead's transfers.
    final class Token: Sendable {}
    let lookaheadToken = Token()
    /// Serialises metadata saves and freeing, so an older snapshot never
    /// lands last and no save can claim bytes a freeing is punching; holds
    /// whether the metadata on disk may claim bytes (while it claims none,
    /// a save that claims none need not be synced).
    /// `Locked`, not `Mutex`: ThreadSanitizer does not see Mutex's futex,
    /// and reported two flushes of one loader (a `remove` and the flusher)
    /// as racing on what it guards. An idle entry is a record, so only
    /// loaders in use pay for its NSLock.
    let flushLock = Locked(false)

    /// Everything that changes (LoaderState.swift); waits on its condition
    /// are for bytes, probes, freeing and the kernel.
    let lock: ConditionLocked<LoaderState>
    /// Its metadata could not be read when it was made: it never makes or
    /// claims a cache entry (reads pass uncached), so nothing on disk is
    /// replaced by a loader that does not know what it said.
    let cacheUnusable: Bool
    /// Its entry's directory was made ahead of the transfers that fill it
    /// (`prepareEntry`); read without the lock on every read.
    let entryPrepared = Atomic<Bool>(false)

    /// Called (with `lock` held) when the remote content changed, with the
    /// new generation; true when the kernel is being told to drop the
    /// file's pages under every name, and `kernelForgot(generation:)`
    /// follows once it has. Nil or false: no kernel holds pages (no mount).
    public var onChange: (@Sendable (_ generation: Int) -> Bool)? {
        get { lock.withLock { $0.changeHandler } }
        set { lock.withLock { $0.changeHandler = newValue } }
    }

    public convenience init(source: Source, store: CacheStore, fetcher: Fetching, settings: LoaderSettings,
                            statistics: Statistics = Statistics(), budget: CacheBudget? = nil,
                            openFiles: OpenDataFiles = OpenDataFiles()) {
        self.init(source: source, context: LoaderContext(store: store, fetcher: fetcher, settings: settings,
                                                         statistics: statistics, budget: budget, openFiles: openFiles))
    }

    /// A loader over the cache entry's metadata, read now, or `meta` when
    /// the caller read it (nil: none) while nothing could change the entry.
    public init(source: Source, context: LoaderContext, meta preloaded: EntryMeta?? = nil) {
        self.source = source
        self.context = context
        // The data file is opened when first needed: an idle entry holds
        // no descriptor.
        let read: CacheStore.MetaRead = preloaded.map { $0.map { .found($0) } ?? .missing }
            ?? context.store.readMeta(forKey: source.url)
        var state = LoaderState(clock: context.settings.clock)
        cacheUnusable = if case .unreadable = read { true } else { false }
        if case .unreadable(let error) = read {
            // Taken as new, its first save would replace metadata that
            // may claim bytes it then writes over (a changed file's, with
            // a crash between). This loader goes without the cache.
            Log.warning("\(source.displayURL): cannot read its cache metadata (\(error.message)); "
                        + "reading it without the cache for now")
        }
        if case .found(let meta) = read {
            state.info = meta.info
            state.present = meta.present
            state.lastAccess = Double(meta.lastAccess)
            state.lastValidated = meta.lastValidated
            state.pinned = meta.pinned
            // Kept in the metadata: a remount goes on evicting a scan's
            // bytes first, and a player's never for them.
            state.scanOnly = context.settings.readClasses && (meta.present.isEmpty || meta.scanOnly)
            state.hasEntry = true
            state.lookahead = ContainerLookahead(cold: meta.present.isEmpty)
        }
        lock = ConditionLocked(state)
        if case .found(let meta) = read { flushLock.withLock { $0 = !meta.present.isEmpty } }
    }

    deinit {
        openFiles.replace(ObjectIdentifier(self), with: nil)
    }

    /// The data file, opened if need be; nil without a cache entry, or when
    /// it cannot be opened (said once in a while): that read or write then
    /// goes without the cache, and only it.
    func openDataFile(_ state: inout LoaderState) -> DataFile? {
        guard state.hasEntry, let length = state.info?.length else { return nil }
        do {
            return try openFiles.file(for: ObjectIdentifier(self)) {
                DataFile(fd: try store.openData(forKey: key, length: length))
            }
        } catch {
            if now() - state.openFailureSaidAt > Self.openFailureQuiet {
                state.openFailureSaidAt = now()
                Log.warning("\(source.displayURL): cannot open its cache data: \(error); reading without the cache")
            }
            return nil
        }
    }

    var key: String { source.url }

    /// Monotonic seconds: for backoff, deadlines and every other duration.
    func now() -> Double { settings.clock.monotonic() }

    /// Seconds since the epoch: for the last access and validation, which
    /// the metadata keeps.
    func wallNow() -> Double { settings.clock.wall() }

    /// A deadline `seconds` from now on the loader's clock.
    func deadline(after seconds: Double) -> Deadline { Deadline.after(seconds: seconds, clock: settings.clock) }

    // MARK: Content information

    /// Starts learning the content info in the background unless it is
    /// known: a listing's entries, probed in parallel behind any lookup.
    /// Returns whether it started a probe; `then` runs (with no lock held)
    /// once that probe settled.
    @discardableResult
    public func prefetchInfo(then settled: (@Sendable () -> Void)? = nil) -> Bool {
        lock.withLock { state in
            guard state.info == nil else { return false }
            switch state.probe {
            case .idle: break
            case .retrying(let at) where now() >= at: break
            default: return false
            }
            startProbe(&state, priority: .probe, then: settled)
            return true
        }
    }

    /// A listing names this entry; false when its info is known already.
    func markListed() -> Bool {
        lock.withLock { state in
            guard state.info == nil else { return false }
            state.listed = true
            return true
        }
    }

    /// Makes the entry's directory before bytes arrive for it, on this
    /// (reader's or admin's) thread with no lock held: made on the network
    /// thread as the first bytes came, its mkdir and the fsync of its
    /// parent stalled every transfer. Only for a file about to fetch bytes
    /// (read, preload), never for one merely stat'ed. A failure is left to
    /// the data file's open, which says it and reads without the cache.
    func prepareEntry() {
        guard !cacheUnusable, !entryPrepared.load(ordering: .relaxed) else { return }
        if (try? store.prepareEntry(forKey: key)) != nil { entryPrepared.store(true, ordering: .relaxed) }
    }

    /// Whether the content info is known without asking the server.
    public var knowsInfo: Bool {
        lock.withLock { $0.info != nil }
    }

    /// The content info, from the cache or the server; waits for a probe.
    public func contentInfo() throws -> ContentInfo {
        if !entryPrepared.load(ordering: .relaxed) {
            // A lookup's probe brings the first bytes along (`startProbe`).
            let probesBytes = lock.withLock { $0.info == nil && !$0.listed && firstBytesOfLookup > 0 }
            if probesBytes { prepareEntry() }
        }
        let deadline = deadline(after: settings.timeout)
        return try lock.withScope { scope in
            while true {
                if let info = scope.state.info { return info }
                switch scope.state.probe {
                case .running(let running):
                    running.promote()
                    if !scope.wait(until: deadline) {
                        throw MediaError.io("\(source.displayURL): no answer within \(Int(settings.timeout)) s")
                    }
                case .retrying(let at) where now() < at:
                    let wake = deadline.earlier(Deadline(at: at, clock: settings.clock))
                    if !scope.wait(until: wake) && wake.at == deadline.at {
                        throw MediaError.io("\(source.displayURL): no answer within \(Int(settings.timeout)) s")
                    }
                case .failed(let error, let at) where now() - at < settings.probeRetryAfter:
                    throw error
                case .idle, .retrying, .failed:
                    startProbe(&scope.state)
                }
            }
        }
    }

    /// What a lookup's probe fetches of the file: none for a segmented VOD,
    /// whose size its parts' lengths give (a stat then sends one request
    /// per part at most, and its first bytes wait for a read).
    private var firstBytesOfLookup: Int64 { context.segmented?.serves(source.url) == true ? 0 : settings.probeFirstBytes }

    func startProbe(_ state: inout LoaderState, priority: FetchRequest.Priority = .read,
                    then settled: (@Sendable () -> Void)? = nil) {
        // The completion may run before `start` returns; it waits for the
        // lock held here, so the state below is set first.
        // A lookup's probe brings the first bytes along (FileLoader+Transfers.swift);
        // a listing's stays byte-frugal.
        let firstBytes = priority == .read && !state.listed ? firstBytesOfLookup : 0
        state.probe = .running(ContentProbe.start(url: source.url, fetcher: fetcher, clock: settings.clock, priority: priority,
                                                  firstBytes: firstBytes, handover: { [self] info, id, head, askedAt in
            self.adoptProbe(info, id: id, head: head, limit: firstBytes, askedAt: askedAt)
        }) { [self] result in
            self.probeFinished(result)
            settled?()
        })
    }

    func probeFinished(_ result: Result<ContentInfo, MediaError>) {
        defer { lock.broadcast() }
        lock.withLock { settleProbe(result, in: &$0) }
    }

    /// `logged`: the failure was said already (a record probe's).
    private func settleProbe(_ result: Result<ContentInfo, MediaError>, in state: inout LoaderState,
                             logged: Bool = false, at: Double? = nil) {
        let at = at ?? now()
        switch result {
        case .success(let learned):
            take(learned, in: &state)
        case .failure(let error) where error.errno == EIO && state.probeAttempts + 1 < settings.maxAttempts:
            // A transient failure (unreachable, 5xx): lookups waiting now,
            // or coming later, probe again after a backoff, bounded by their
            // timeout. No timer thread: nothing probes once nobody asks.
            if !logged { Log.warning("\(source.displayURL): \(error.message); retrying") }
            state.probeAttempts += 1
            state.probe = .retrying(at: at + backoff(afterFailures: state.probeAttempts))
        case .failure(let error):
            if !logged { Log.error("\(source.displayURL): \(error.message)") }
            state.probe = .failed(error, at: at)
            state.probeAttempts = 0
        }
    }

    /// The wait before the next try after `failures` in a row: 0.25 s,
    /// 0.5 s, 1 s... up to the settings' most.
    func backoff(afterFailures failures: Int) -> Double {
        min(settings.firstBackoff * Double(1 << min(failures - 1, 16)), settings.maxBackoff)
    }

    /// What a probe of this entry made without it (a listing's, into its
    /// record) found, taken unless the info is known or its own probe
    /// runs: the answer, or the failure as if this loader's own probe had
    /// failed at `finishedAt` (its backoff decides when a stat asks again).
    func adoptRecordProbe(_ result: Result<ContentInfo, MediaError>, finishedAt: Double) {
        defer { lock.broadcast() }
        lock.withLock { state in
            guard state.info == nil else { return }
            if case .running = state.probe { return }
            switch result {
            case .success(let learned): take(learned, in: &state)
            case .failure(let error): settleProbe(.failure(error), in: &state, logged: true, at: finishedAt)
            }
        }
    }

    /// A probe's answer: a new entry.
    func take(_ learned: ContentInfo, in state: inout LoaderState) {
        // Its data file is made when first needed.
        openFiles.replace(ObjectIdentifier(self), with: nil)
        state.hasEntry = !cacheUnusable
        state.info = learned
        state.present = ByteRangeSet()
        state.sawPartial = false
        state.lastAccess = wallNow()
        state.lastValidated = Int64(state.lastAccess)
        state.dirty = true
        state.probe = .idle
        state.probeAttempts = 0
        state.scanOnly = settings.readClasses
        state.lookahead = ContainerLookahead(cold: true)
    }

    /// Its record said only scans read it (a class its metadata may not hold yet).
    func markScanOnly() {
        lock.withLock { $0.scanOnly = true }
    }

    // MARK: Reading

    /// Reads up to `buffer.count` bytes at `offset`: short at the end of the
    /// file, 0 past it. Waits for missing bytes, bounded by the timeout.
    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64, pattern: ReadPattern) throws -> Int {
        prepareEntry()
        let info = try contentInfo()
        guard offset >= 0, offset < info.length else { return 0 }
        finishFreeing()
        let end = offset + min(Int64(buffer.count), info.length - offset)
        let wanted = offset..<end
        if let budget {
            // A read that must fetch lets the evictor free older bytes
            // first, so that its bytes are cached too.
            let missing = Int64(wanted.count) - lock.withLock { $0.present.overlapCount(with: wanted) }
            if missing > 0 {
                budget.awaitRoom(missing, timeout: min(settings.timeout, Self.roomWait), for: pattern.readClass)
            }
        }
        let target = UnsafeMutableRawBufferPointer(rebasing: buffer[..<Int(end - offset)])
        let grant = try waitUntilAvailable(wanted, into: target, info: info, pattern: pattern)
        defer { endRead(grant.token) }
        if grant.cachedAhead > 0, let file = grant.file {
            // A stream read from the cache: start the disk reading the cached
            // bytes ahead of it, so the next reads find them in the page
            // cache. Never holes: reading those would only make zero pages.
            _ = posix_fadvise(file.fd, off_t(end), off_t(grant.cachedAhead), POSIX_FADV_WILLNEED)
        }
        for part in grant.delivered.missing(in: wanted) {
            guard let file = grant.file else {
                throw MediaError.io("the cache of \(source.displayURL) has no data file")
            }
            try readPresent(from: file, into: target, at: Int(part.lowerBound - offset), range: part)
            statistics.bytesFromCache.add(Int64(part.count), ordering: .relaxed)
        }
        statistics.countServed(Int64(target.count), byClass: pattern.readClass.rawValue)
        return target.count
    }

    /// What a read may do once its bytes are available: the ranges already
    /// in its buffer, the data file to pread the rest from (held, so it
    /// stays open), and its token in `reading` (nil: nothing to pread).
    struct ReadGrant {
        var delivered: ByteRangeSet
        var cachedAhead: Int64
        var file: DataFile?
        var token: Int?
    }

    /// Ends a read's claim on the bytes it preads; a freeing may wait on it.
    func endRead(_ token: Int?) {
        guard let token else { return }
        let freeing = lock.withLock { state in
            state.reading[token] = nil
            return state.isFreeingAnything
        }
        if freeing { lock.broadcast() }
    }

    /// Counts a read in `reading` until its preads are done.
    func beginRead(_ range: Range<Int64>, delivered: ByteRangeSet, cachedAhead: Int64,
                   in state: inout LoaderState) -> ReadGrant {
        if delivered.contains(range) { return ReadGrant(delivered: delivered, cachedAhead: 0, file: nil, token: nil) }
        let token = state.nextWait
        state.nextWait += 1
        state.reading[token] = range
        return ReadGrant(delivered: delivered, cachedAhead: cachedAhead, file: openDataFile(&state), token: token)
    }

    /// Returns once every byte of `wanted` is either copied into `buffer`
    /// (the ranges returned) or present in the cache; the read is then
    /// counted in `reading` until its preads are done.
    func waitUntilAvailable(_ wanted: Range<Int64>, into buffer: UnsafeMutableRawBufferPointer,
                            info: ContentInfo, pattern: ReadPattern) throws -> ReadGrant {
        let deadline = deadline(after: settings.timeout)
        let owner = ObjectIdentifier(pattern)
        return try lock.withScope { scope in
            let startGeneration = scope.state.generation
            if let opened = pattern.generation, opened != startGeneration {
                throw MediaError.io("\(source.displayURL) changed on the server since it was opened; open it again")
            }
            if let cached = beginCachedRead(wanted, info: info, pattern: pattern, in: &scope.state) { return cached }
            // A reader that looks sequential fetches at least a round trip's worth
            // of the link: less leaves it idle while the reader comes back for more.
            var (window, ahead) = partWindows(wanted, window: pattern.fetchWindow(
                bytesPerRoundTrip: settings.link?.bytesPerRoundTrip(to: source.url) ?? 0), pattern: pattern)
            // An archive member's first read asks for what a lookup asks of
            // a plain file (its size came from the index, so none did): a
            // demuxer's probe reads a few hundred KiB from the start, in
            // windows that would each cost a round trip (a stored mkv's
            // ffprobe through a 100 ms link: 5 rounds and 0.58 s, not 2 and
            // 0.23 s). A scan's or a player's alike: the plain file beside it
            // gets those bytes at its lookup whichever reads it.
            var holesOwner = owner
            if wanted.lowerBound == 0, scope.state.present.isEmpty,
               context.segmented?.isArchiveMember(source.url) == true {
                window = max(window, min(settings.probeFirstBytes, info.length) - wanted.lowerBound)
                // The file's, not the handle's, as a plain file's lookup
                // probe is: it runs to its end whatever the reader does
                // next. A demuxer's seek to an mp4's moov stopped it at 64
                // KiB, and the reads after the moov asked for the rest again.
                holesOwner = ObjectIdentifier(self)
            }
            var attempts = Attempts(stops: scope.state.stops)
            let wait = scope.state.nextWait
            scope.state.nextWait += 1
            scope.state.waits[wait] = LoaderState.Wait(range: wanted, buffer: buffer)
            defer { scope.state.waits[wait] = nil }
            var available = scope.state.availability(of: wait)
            try requestHoles(in: available.missing(in: wanted), window: window, owner: holesOwner,
                             readClass: pattern.readClass, streams: pattern.streams, info: info,
                             attempts: &attempts, state: &scope.state)
            readAhead(from: wanted.upperBound, window: ahead, owner: owner, readClass: pattern.readClass,
                      streams: pattern.streams, info: info,
                      in: &scope.state)
            // A wait that lasts says why, at debug level, after 1 s and each
            // time it doubles: which transfer it counts on and where that is
            // (a WAN seek once stalled 6 s with nothing in the log).
            let waitStarted = now()
            var reportAfter = Self.slowWaitReport
            while !available.contains(wanted) {
                let retryAt = scope.state.retryAt
                var wake = retryAt > now() ? deadline.earlier(Deadline(at: retryAt, clock: settings.clock)) : deadline
                let report = Deadline(at: waitStarted + reportAfter, clock: settings.clock)
                let reporting = report.at < wake.at
                if reporting { wake = report }
                let woken = scope.wait(until: wake)
                if !woken && reporting {
                    reportAfter *= 2
                    available = scope.state.availability(of: wait)
                    if !available.contains(wanted) {
                        Log.debug(slowWaitReason(for: wanted, missing: available.missing(in: wanted),
                                                 since: waitStarted, in: scope.state))
                    }
                    continue
                }
                if !woken && wake.at == deadline.at {
                    available = scope.state.availability(of: wait)
                    if available.contains(wanted) { break }
                    throw MediaError.io("\(source.displayURL): bytes \(wanted.lowerBound)-\(wanted.upperBound - 1) "
                                        + "did not arrive within \(Int(settings.timeout)) s")
                }
                if scope.state.generation != startGeneration {
                    throw MediaError.io("\(source.displayURL) changed on the server during the read")
                }
                available = scope.state.availability(of: wait)
                try requestHoles(in: available.missing(in: wanted), window: window, owner: holesOwner,
                                 readClass: pattern.readClass, streams: pattern.streams, info: info,
                             attempts: &attempts, state: &scope.state)
            }
            if scope.state.generation != startGeneration {
                throw MediaError.io("\(source.displayURL) changed on the server during the read")
            }
            return beginRead(wanted, delivered: scope.state.waits[wait]!.filled, cachedAhead: 0, in: &scope.state)
        }
    }

    /// After how long a read's wait says why it waits (then at each doubling).
    static let slowWaitReport = 1.0

    /// Why a read still waits: the transfers that cover its first missing
    /// byte (or none, and when a retry is due).
    func slowWaitReason(for wanted: Range<Int64>, missing: [Range<Int64>], since started: Double,
                        in state: LoaderState) -> String {
        let first = missing.first?.lowerBound ?? wanted.lowerBound
        let covering = state.transfers.filter { !$0.value.cancelled && $0.value.position <= first && first < $0.value.end }
        let why: String
        if covering.isEmpty {
            let retry = state.retryAt > now() ? String(format: "a retry due in %.1f s", state.retryAt - now()) : "none yet"
            why = "no transfer covers byte \(first) (\(retry))"
        } else {
            why = covering.map { id, transfer in
                let held = transfer.limit.map { $0 < transfer.end ? ", held at \($0)" : "" } ?? ""
                let answered = transfer.head == nil ? ", no answer yet" : ""
                return "transfer \(id) at byte \(transfer.position) of \(transfer.start)-\(transfer.end - 1)"
                    + " (\(transfer.priority)\(held)\(answered))"
            }.joined(separator: "; ")
        }
        let waited = String(format: "%.1f", now() - started)
        return "read \(wanted.lowerBound)-\(wanted.upperBound - 1) of \(source.displayURL) has waited \(waited) s: \(why)"
    }

    /// Records a read in the handle's pattern and the loader's; when every
    /// byte of it is cached, counts it in `reading` (nil: it must wait).
    private func beginCachedRead(_ wanted: Range<Int64>, info: ContentInfo, pattern: ReadPattern,
                                 in state: inout LoaderState) -> ReadGrant? {
        let owner = ObjectIdentifier(pattern)
        if !pattern.hasRead, pattern.readClass == .play, settings.handleGrace > 0 {
            if !state.lingering.isEmpty { resumeLingering(pattern, at: wanted.lowerBound, in: &state) }
            if !pattern.hasRead, state.fresh.count < Self.maxLingering { state.fresh[owner] = pattern }
        }
        let previousEnd = pattern.lastReadEnd
        if pattern.record(offset: wanted.lowerBound, end: wanted.upperBound) {
            cancelTransfers(of: owner, except: wanted.lowerBound, in: &state)
        }
        notePartStep(wanted, after: previousEnd, pattern: pattern, info: info, in: &state)
        state.lastAccess = wallNow()
        state.lastReadOffset = wanted.lowerBound
        if state.scanOnly && pattern.readClass == .scan { state.scanRead.insert(wanted) }
        // A player's read makes the whole entry a player's.
        if pattern.readClass == .play && state.scanOnly {
            state.scanOnly = false
            state.scanRead = ByteRangeSet()
            // Saved, or a remount would take the player's bytes for a scan's.
            state.dirty = true
        }
        guard state.present.contains(wanted) else { return nil }
        // Reading cached bytes sends no request: readahead starts from a
        // read that had to fetch, and goes on while this handle streams.
        let fetching = state.transfers.values.contains(where: { $0.owner == owner })
            || state.yielded.remove(owner) != nil
        if fetching {
            readAhead(from: wanted.upperBound, window: pattern.cachedReadWindow, owner: owner,
                      readClass: pattern.readClass, streams: pattern.streams, info: info, in: &state)
        }
        // Only a stream that is not fetching reads ahead from the disk.
        let streaming = pattern.window > 0 && !fetching
        let ahead = streaming
            ? min(state.present.presentEnd(from: wanted.upperBound), wanted.upperBound + Self.diskReadahead)
                - wanted.upperBound
            : 0
        return beginRead(wanted, delivered: ByteRangeSet(), cachedAhead: ahead, in: &state)
    }

    /// What one read has asked for: each byte is fetched at most
    /// `maxAttempts` times, however many holes the read spans.
    struct Attempts {
        var asked = ByteRangeSet()
        var retries = 0
        /// `stops` when these were asked: transfers the cache stopped
        /// itself (a purge, a change) say nothing of the server.
        var stops: Int
    }

    /// Makes sure a transfer is on its way for every byte of `holes`: joins
    /// running ones, starts the rest (reaching `window` further). Throws
    /// once a read has tried too often.
    /// `streams`: the reader reads on from where it was, so a transfer may
    /// be a long one, held at the window.
    func requestHoles(in holes: [Range<Int64>], window: Int64, owner: ObjectIdentifier, readClass: ReadClass = .play,
                      streams: Bool = false, info: ContentInfo, attempts: inout Attempts,
                      state: inout LoaderState) throws {
        let priority = readClass.readPriority
        for hole in holes {
            var point = hole.lowerBound
            while point < hole.upperBound {
                if let (id, covering) = state.transfers.first(where: { covers($0.value, point, in: state) }) {
                    // A scan's read lifts a preload to a scan's place, never
                    // a transfer to a player's.
                    if covering.priority > priority {
                        state.transfers[id]!.priority = priority
                        fetcher.promote(id, to: priority)
                    }
                    // A long transfer goes on at least to the end of the hole.
                    if covering.limit != nil {
                        extendHold(id, to: max(hole.upperBound, point + window), mustReach: hole.upperBound, in: &state)
                    }
                    point = max(state.transfers[id]!.reach, point + 1)
                    continue
                }
                // A server without ranges sends the whole body to every
                // request: one stream at a time, which every reader joins.
                if !info.acceptsRanges, let (_, stream) = state.transfers.first(where: { !$0.value.cancelled }) {
                    point = max(hole.upperBound, min(stream.end, hole.upperBound))
                    continue
                }
                // A VOD's part without its key fails until the key comes
                // (`keyArrived`), as EIO: never cipher text, never a retry.
                if let error = state.lastError, error.errno == ENOKEY {
                    throw MediaError(EIO, "\(source.displayURL): \(error.message)")
                }
                // A 404 or 403 is believed for a while, not forever.
                if let error = state.lastError, error.errno == ENOENT || error.errno == EACCES,
                   now() - state.lastErrorAt < settings.probeRetryAfter {
                    throw MediaError(error.errno, "\(source.displayURL): \(error.message)")
                }
                if let error = state.lastError, now() < state.unavailableUntil {
                    throw MediaError(error.errno, "\(source.displayURL): \(error.message)")
                }
                if now() < state.retryAt { return }
                if attempts.stops != state.stops { attempts = Attempts(stops: state.stops) }
                if attempts.asked.contains(point..<point + 1) {
                    guard attempts.retries + 1 < settings.maxAttempts else {
                        state.unavailableUntil = now() + settings.unavailableFor
                        state.failuresInARow = 0
                        throw MediaError.io("\(source.displayURL): bytes \(point)-\(hole.upperBound - 1) unavailable: "
                                            + (state.lastError?.message ?? "transfer ended early"))
                    }
                    attempts.retries += 1
                    statistics.countRetry()
                }
                let start = point
                let reach = max(hole.upperBound, point + window)
                // A player that streams asks for the rest of the file once,
                // held at `reach` until it reads on.
                let long = window > 0 && streams && holdsTransfers(info)
                let longEnd = ReadPattern.longTransferEnd(from: start, window: window, readClass: readClass,
                                                          length: info.length)
                point = startPartTransfers(at: start, end: long ? longEnd : reach, hold: long ? reach : nil,
                                           owner: owner, info: info, priority: priority, readClass: readClass,
                                           mustReach: hole.upperBound, in: &state)
                attempts.asked.insert(start..<point)
            }
        }
    }

    /// Keeps at least half a window of bytes present or on their way past
    /// `offset`, topping up a whole window at a time so transfers stay large.
    /// A scan's readahead (a one-frame extraction's) is a scan's bytes, in
    /// its budget, at a scan's place in the network's queue.
    func readAhead(from offset: Int64, window: Int64, owner: ObjectIdentifier, readClass: ReadClass, streams: Bool,
                   info: ContentInfo, in state: inout LoaderState) {
        // Bytes read ahead while the cache cannot be written would be lost.
        guard window > 0, offset < info.length, statistics.cacheWritable, info.acceptsRanges else { return }
        // A long transfer of this stream (its hold at or past the read,
        // within a window) is let go on to a window past the read, in steps
        // of a quarter window, at most 256 KiB: one message to the network
        // thread, not one per read, and small, so a player reading at its
        // bitrate keeps it held for a second or two, not for the hold's limit.
        if let (id, long) = state.transfers.first(where: { (_, transfer) in
            !transfer.cancelled && transfer.isLong && transfer.reach >= offset && transfer.position <= offset + window
        }) {
            if offset + window - long.reach >= min(window / 4, Self.holdStep) {
                extendHold(id, to: offset + window, mustReach: 0, in: &state)
            }
            return
        }
        var lead = offset
        while lead < info.length {
            let presentEnd = state.present.presentEnd(from: lead)
            if presentEnd > lead {
                lead = presentEnd
            } else if let (id, covering) = state.transfers.first(where: {
                !$0.value.cancelled && $0.value.position <= lead && lead < $0.value.end
                    // A long transfer runs to the file's end: it covers a lead
                    // only when its position or hold is near it. One far
                    // behind (a player that read the head, then sought to 80
                    // MiB) was let go on to the seek: 87 MiB and 15 s at 50
                    // Mbit/s before the seek's bytes, not 5 MiB and 2 s.
                    && (!$0.value.isLong || covers($0.value, lead, in: state))
            }) {
                // A long transfer near: let go on to this window.
                if covering.isLong {
                    extendHold(id, to: offset + window, mustReach: 0, in: &state)
                    return
                }
                // The loader's own fetch of the first bytes (a lookup's, an
                // archive member's head) is no sign that the reader goes past
                // it: a demuxer reads its head, then seeks. Its first read
                // past there asks, sized to the link by then. Read ahead from
                // inside it, a mkv's seek sent one long transfer more, stopped.
                if covering.owner == ObjectIdentifier(self) && covering.start == 0 {
                    return
                }
                lead = covering.end
            } else {
                break
            }
            if lead - offset >= window / 2 { return }
        }
        // A scan that reads on has its long transfer's hold let go on above,
        // never a next one ahead: the server fills the sockets' buffers past
        // a hold, so a next transfer asked before the scan gets there sent
        // megabytes it then stopped short of (8 MiB read in 1 MiB preads:
        // 15 MB sent). Its next miss asks for it, a round trip every 8 MiB.
        if readClass == .scan && streams { return }
        if lead < info.length {
            // Only a player's readahead is a long transfer: a scan that
            // streams returned above, and a thumbnail's runs are short.
            let long = readClass == .play && holdsTransfers(info)
            _ = startPartTransfers(at: lead, end: long ? info.length : lead + window, hold: long ? lead + window : nil,
                                   owner: owner, info: info, priority: readClass == .scan ? .scan : .readahead,
                                   readClass: readClass, in: &state)
        }
    }

    /// Whether transfers of this file may be long ones, held by the
    /// fetcher until their reader reads on (FetchRequest.allowance): not
    /// for a server without ranges, whose every answer is the whole body.
    func holdsTransfers(_ info: ContentInfo) -> Bool {
        info.acceptsRanges && fetcher.holdsTransfers(of: source.url)
    }

    /// Lets a long transfer go on to `wanted` (up to its end), within the
    /// room under the cache limits, and at least to `mustReach`, which a
    /// read waits on.
    func extendHold(_ id: TransferID, to wanted: Int64, mustReach: Int64, in state: inout LoaderState) {
        guard let transfer = state.transfers[id], !transfer.cancelled, let limit = transfer.limit else { return }
        var target = min(wanted, transfer.end)
        guard target > limit else { return }
        if let budget {
            let more = budget.reserve(upTo: target - limit, for: transfer.readClass)
            state.transfers[id]!.reserved += more
            target = max(limit + more, min(target, mustReach))
            guard target > limit else { return }
        }
        state.transfers[id]!.limit = target
        fetcher.allow(id, through: target - transfer.start)
    }

    /// Whether a running transfer will soon write `point`.
    func covers(_ transfer: Transfer, _ point: Int64, in state: borrowing LoaderState) -> Bool {
        state.covers(transfer, point, joinDistance: settings.joinDistance)
    }

    /// Stops the transfers a handle started that no read waits on, unless
    /// `offset` will soon be reached by one or it is nearly done: less left
    /// than `cancelTolerance`, or than one round trip of the link carries,
    /// which the server has sent already when the stop reaches it. Stopping
    /// those saved nothing, and another handle's read of those bytes then
    /// fetched them a second time (seen in CI: a 1 MiB link-sized fetch
    /// stopped, then 112 KiB of it asked for again).
    func cancelTransfers(of owner: ObjectIdentifier, except offset: Int64?, in state: inout LoaderState) {
        guard state.transfers.values.contains(where: { $0.owner == owner && !$0.cancelled }) else { return }
        let inFlight = max(settings.cancelTolerance, settings.link?.bytesPerRoundTrip(to: source.url) ?? 0)
        for (id, transfer) in state.transfers where transfer.owner == owner && !transfer.cancelled {
            if let offset, covers(transfer, offset, in: state) { continue }
            // A long transfer is never nearly done: it would run on to the
            // end of the file, held or not.
            if !transfer.isLong && transfer.end - transfer.position < inFlight { continue }
            if state.isWaitedOn(transfer.position..<max(transfer.position, transfer.reach)) { continue }
            state.transfers[id]!.cancelled = true
            fetcher.cancel(id)
            Log.debug("stop GET \(source.displayURL) at byte \(transfer.position) (was to reach \(transfer.end))")
        }
    }

    /// How a new handle may use the kernel's page cache of the file.
    public enum PageCacheUse: Equatable, Sendable {
        /// The kernel holds no page of another version: keep its pages.
        case keep
        /// It may: the open drops them (no keep_cache) before it returns.
        case drop
        /// A handle of an older version still reads through the page cache:
        /// this one goes around it (direct I/O), so neither sees the other's pages.
        case bypass
    }

    /// A handle opened: its reads belong to the content version of now.
    /// `throughPageCache`: the kernel reads it through its page cache (not
    /// passthrough); the answer says how, decided with the version it reads.
    @discardableResult
    public func attach(_ pattern: ReadPattern, throughPageCache: Bool = true) -> PageCacheUse {
        lock.withLock { state in
            state.openHandles += 1
            if state.openHandles == 1 { startLookahead(in: &state) }
            let generation = state.generation
            pattern.generation = generation
            guard throughPageCache else { return .keep }
            if state.pageCacheHandles.keys.contains(where: { $0 != generation }) { return .bypass }
            state.pageCacheHandles[generation, default: 0] += 1
            pattern.inPageCache = true
            return state.kernelClean == generation ? .keep : .drop
        }
    }

    /// Closed handles kept for `--handle-grace` at once, per file; past
    /// it the oldest goes.
    static let maxLingering = 8

    /// A handle closed: what it alone asked for is no longer needed, but a
    /// player's handle of the current version that has read is kept for
    /// the grace period, its transfers running: servers close and open a
    /// file every few MiB of a stream.
    public func release(_ pattern: ReadPattern) {
        lock.withLock { state in
            if pattern.inPageCache, let opened = pattern.generation, let count = state.pageCacheHandles[opened] {
                state.pageCacheHandles[opened] = count > 1 ? count - 1 : nil
                pattern.inPageCache = false
            }
            state.openHandles = max(0, state.openHandles - 1)
            if state.openHandles == 0 { stopLookahead(in: &state) }
            endLingering(&state, all: false)
            state.fresh[ObjectIdentifier(pattern)] = nil
            state.yielded.remove(ObjectIdentifier(pattern))
            if settings.handleGrace > 0, pattern.readClass == .play, pattern.hasRead,
               pattern.generation == state.generation {
                if handOver(pattern, in: &state) { return }
                if state.lingering.count >= Self.maxLingering,
                   let oldest = state.lingering.min(by: { $0.value.until < $1.value.until })?.key {
                    state.lingering[oldest] = nil
                    cancelTransfers(of: oldest, except: nil, in: &state)
                }
                state.lingering[ObjectIdentifier(pattern)] = (pattern, now() + settings.handleGrace)
                return
            }
            cancelTransfers(of: ObjectIdentifier(pattern), except: nil, in: &state)
        }
    }

    /// Stops the transfers of closed handles whose grace ended (`all`: of
    /// every closed handle).
    func endLingering(_ state: inout LoaderState, all: Bool) {
        guard !state.lingering.isEmpty else { return }
        let now = now()
        for (owner, closed) in state.lingering where all || closed.until <= now {
            state.lingering[owner] = nil
            cancelTransfers(of: owner, except: nil, in: &state)
        }
    }

    /// A closing handle whose sequel was opened (and read) before this
    /// release: the sequel, still on the streak it began where this one
    /// would read next, takes this one's streak and transfers.
    func handOver(_ closing: ReadPattern, in state: inout LoaderState) -> Bool {
        guard let (id, heir) = state.fresh.first(where: {
            $0.value.firstStreakStart >= 0 && closing.follows($0.value.firstStreakStart)
                && $0.value.generation == closing.generation
        }) else { return false }
        state.fresh[id] = nil
        heir.inherit(closing)
        let owner = ObjectIdentifier(closing)
        for (transfer, running) in state.transfers where running.owner == owner { state.transfers[transfer]!.owner = id }
        statistics.graceResumes.add(1, ordering: .relaxed)
        return true
    }

    /// A new player's handle whose first read is where a closed handle
    /// (within its grace) would read next takes that handle's pattern and
    /// its transfers: no cold start, no transfer stopped and asked again.
    func resumeLingering(_ pattern: ReadPattern, at offset: Int64, in state: inout LoaderState) {
        endLingering(&state, all: false)
        guard let (owner, closed) = state.lingering.first(where: {
            $0.value.pattern.follows(offset) && $0.value.pattern.generation == pattern.generation
        }) else { return }
        state.lingering[owner] = nil
        pattern.resume(from: closed.pattern)
        let heir = ObjectIdentifier(pattern)
        for (id, transfer) in state.transfers where transfer.owner == owner { state.transfers[id]!.owner = heir }
        statistics.graceResumes.add(1, ordering: .relaxed)
        Log.debug("\(source.displayURL): a new handle goes on from byte \(offset) with a closed one's transfers")
    }

    /// The kernel has dropped the pages and attributes of every name of the
    /// file as of `generation`: opens of that version may keep pages again.
    public func kernelForgot(generation forgotten: Int) {
        defer { lock.broadcast() }
        lock.withLock { $0.kernelClean = max($0.kernelClean, forgotten) }
    }

    /// Waits (bounded) until the kernel has dropped what it held of older
    /// versions; false on timeout. An open that saw the change waits, so
    /// its handle's fstat already shows the new size.
    @discardableResult
    public func awaitKernelForgot(timeout: Double) -> Bool {
        let deadline = deadline(after: timeout)
        return lock.withScope { scope in
            while scope.state.kernelClean < scope.state.generation {
                if !scope.wait(until: deadline) { return scope.state.kernelClean >= scope.state.generation }
            }
            return true
        }
    }

    /// Starts a transfer at `start` reaching toward `end`, but never into
    /// present bytes or a running transfer, nor (past `mustReach`, the
    /// bytes a read waits for) beyond the room under the cache limits.
    /// Returns where it stops: `start` when it started none.
    @discardableResult
    /// `hold`: a long transfer, to `wantedEnd` but held there for now
    /// (nil: one that runs to its end). Returns where the transfer stops
    /// for now (`start`: none started).
    func startTransfer(at start: Int64, end wantedEnd: Int64, hold: Int64? = nil, owner: ObjectIdentifier,
                       info: ContentInfo, priority: FetchRequest.Priority = .read, readClass: ReadClass = .play,
                       mustReach: Int64 = 0, in state: inout LoaderState) -> Int64 {
        var end = min(wantedEnd, info.length)
        if info.length - end <= settings.tailStretch { end = info.length }
        if let next = state.present.nextPresent(atOrAfter: start) { end = min(end, next) }
        for transfer in state.transfers.values where !transfer.cancelled && transfer.position > start {
            end = min(end, transfer.position)
        }
        var limit = hold.map { min(max($0, start), end) }
        if limit == end { limit = nil }
        // Room under the cache limits: a read fetches its bytes whatever
        // (those that do not fit pass uncached); readahead and preload
        // fetch only what will be kept.
        let reserved = budget?.reserve(upTo: (limit ?? end) - start, for: readClass) ?? 0
        if budget != nil {
            if let wanted = limit {
                limit = max(start + reserved, min(wanted, mustReach))
                guard limit! > start else { return start }
            } else {
                end = max(start + reserved, min(end, mustReach))
                guard end > start else { return start }
            }
        }
        // A long transfer that would run on into these bytes stops where
        // they begin: they are fetched once.
        for (id, transfer) in state.transfers
        where !transfer.cancelled && transfer.limit != nil && transfer.position <= start && start < transfer.end {
            state.transfers[id]!.end = start
            state.transfers[id]!.limit = min(transfer.limit!, start)
        }
        // The validators of now, under the lock the transfer is recorded
        // under: its answer is judged against the same version.
        let current = state.info ?? info
        let validator = current.etag.flatMap { $0.hasPrefix("W/") ? nil : $0 } ?? current.lastModified
        var request = FetchRequest(url: source.url, range: start..<end, ifRange: validator, priority: priority)
        request.allowance = limit.map { $0 - start }
        let id = fetcher.start(request, delegate: self)
        countTransferStarted()
        state.transfers[id] = Transfer(end: end, position: start, owner: owner, priority: priority, reserved: reserved,
                                       askedAt: now(), ifRange: validator != nil, readClass: readClass,
                                       limit: limit, start: start)
        if let limit {
            Log.debug("GET \(source.displayURL) bytes \(start)-\(end - 1), held at \(limit)")
        } else {
            Log.debug("GET \(source.displayURL) bytes \(start)-\(end - 1)")
        }
        return limit ?? end
    }

    /// A transfer started: one more request, one more in flight.
    func countTransferStarted() {
        statistics.requests.add(1, ordering: .relaxed)
        statistics.transfersInFlight.add(1, ordering: .relaxed)
    }

    func readPresent(from file: DataFile, into buffer: UnsafeMutableRawBufferPointer, at start: Int,
                     range: Range<Int64>) throws {
        let target = UnsafeMutableRawBufferPointer(rebasing: buffer[start..<(start + Int(range.count))])
        let count: Int
        do {
            count = try FileIO.readFully(fd: file.fd, into: target, at: range.lowerBound)
        } catch let error as MediaError {
            throw MediaError(error.errno, "read from the cache of \(source.displayURL): \(error.message)")
        }
        if count < target.count {
            throw MediaError.io("cache data of \(source.displayURL) is shorter than its metadata")
        }
    }

    // MARK: Attributes and persistence

    /// Size and mtime for getattr; throws what the probe learned on failure.
    public func attributes() throws -> (size: Int64, mtime: Int) {
        Self.attributes(of: try contentInfo())
    }

    /// The attributes if the content info is known, without waiting: a
    /// listing hands these to the kernel with the names, and must never
    /// wait on the network for them.
    public func knownAttributes() -> (size: Int64, mtime: Int)? {
        lock.withLock { $0.info }.map(Self.attributes(of:))
    }

    static func attributes(of info: ContentInfo) -> (size: Int64, mtime: Int) {
        (info.length, info.lastModified.flatMap(HTTPDate.seconds) ?? 0)
    }

    /// Persists the metadata if it changed: data first (fdatasync), then the
    /// metadata, so it never claims bytes the data file does not hold.
    public func flush() {
        // The flusher's passes end the grace of closed handles nobody opened again.
        lock.withLock { endLingering(&$0, all: false) }
        finishFreeing()
        flushLock.withLock { savedClaims in flushHoldingFlushLock(&savedClaims) }
    }

    private func flushHoldingFlushLock(_ savedClaims: inout Bool) {
        let snapshot = lock.withLock { state -> (meta: EntryMeta, file: DataFile?)? in
            guard state.dirty, let snapshot = metaSnapshot(&state) else { return nil }
            state.dirty = false
            return snapshot
        }
        guard let snapshot else { return }
        do {
            try persist(snapshot, savedClaims: &savedClaims)
        } catch let error as MediaError {
            // Said once, like a failed data write; tried again at the next
            // flush. Until then the old metadata claims less, never more.
            statistics.cacheWriteFailed(error)
            markUnsaved()
        } catch {
            Log.error("cannot save cache metadata of \(source.displayURL): \(error)")
        }
    }

    /// The metadata as of now, with the data file whose bytes it claims
    /// (nil when it claims none). Nil when there is nothing to save, or the
    /// data file cannot be opened.
    func metaSnapshot(_ state: inout LoaderState) -> (meta: EntryMeta, file: DataFile?)? {
        guard state.hasEntry, let info = state.info else { return nil }
        var file: DataFile?
        if !state.present.isEmpty {
            guard let opened = openDataFile(&state) else { return nil }
            file = opened
        }
        return (EntryMeta(url: key, info: info, present: state.present, lastAccess: Int64(state.lastAccess),
                          lastValidated: state.lastValidated, pinned: state.pinned,
                          scanOnly: state.scanOnly && !state.present.isEmpty), file)
    }

    /// Makes the claimed bytes durable, then the metadata that claims them.
    /// Call with `flushLock` held (`savedClaims` is what it holds) and `lock` not held.
    func persist(_ snapshot: (meta: EntryMeta, file: DataFile?), savedClaims: inout Bool) throws {
        do {
            if let file = snapshot.file { try FileIO.syncData(fd: file.fd) }
            let claims = !snapshot.meta.present.isEmpty
            // Durable whenever it claims bytes, or replaces one that did
            // (a purge's must never be undone by a crash).
            let durable = claims || savedClaims
            if claims { savedClaims = true }
            try store.saveMeta(snapshot.meta, forKey: key, durable: durable)
            savedClaims = claims
        } catch let error as MediaError {
            throw MediaError(error.errno, "cannot save cache metadata of \(source.displayURL): \(error.message)")
        }
    }
}
