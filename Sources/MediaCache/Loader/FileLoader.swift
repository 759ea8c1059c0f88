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
import MediaNetwork
import MediaSources
import MediaStore
import MediaSupport
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
    let flushLock = Locked(false, rank: .loaderFlush)

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
        get { lock.withLock { $0.version.changeHandler } }
        set { lock.withLock { $0.version.setChangeHandler(newValue) } }
    }

    package convenience init(source: Source, store: CacheStore, fetcher: Fetching, settings: LoaderSettings,
                            statistics: Statistics? = nil, budget: CacheBudget? = nil,
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
            state.restore(meta, readClasses: context.settings.readClasses)
        }
        lock = ConditionLocked(state, rank: .loader)
        if case .found(let meta) = read { flushLock.withLock { $0 = !meta.present.isEmpty } }
    }

    deinit {
        openFiles.replace(ObjectIdentifier(self), with: nil)
    }

    /// The data file, opened if need be; nil without a cache entry, or when
    /// it cannot be opened (said once in a while): that read or write then
    /// goes without the cache, and only it.
    func openDataFile(_ state: inout LoaderState) -> DataFile? {
        guard state.bytes.hasEntry, let length = state.version.info?.length else { return nil }
        do {
            return try openFiles.file(for: ObjectIdentifier(self)) {
                DataFile(fd: try store.openData(forKey: key, length: length))
            }
        } catch {
            if state.bytes.sayOpenFailure(now: now(), quiet: Self.openFailureQuiet) {
                Log.warning("\(source.displayURL): cannot open its cache data: \(error); reading without the cache")
            }
            return nil
        }
    }

    /// Opens the data file with no lock held when it should be open and is
    /// not, and keeps it only if it is still the one to use: the network
    /// thread then finds it open under the loader's lock (`reserveChunk`),
    /// which never waits on the disk. A freeing or a new version between
    /// the two leaves it unkept, and those bytes pass uncached.
    func prepareDataFile() {
        let owner = ObjectIdentifier(self)
        guard openFiles.touch(owner) == nil else { return }
        let wanted: (length: Int64, version: Int)? = lock.withLock { state in
            guard state.bytes.hasEntry, let length = state.version.info?.length else { return nil }
            return (length, state.handles.dataVersion)
        }
        guard let wanted else { return }
        let opened: DataFile
        do {
            opened = DataFile(fd: try store.openData(forKey: key, length: wanted.length))
        } catch {
            let say = lock.withLock { $0.bytes.sayOpenFailure(now: now(), quiet: Self.openFailureQuiet) }
            if say { Log.warning("\(source.displayURL): cannot open its cache data: \(error); reading without the cache") }
            return
        }
        lock.withLock { state in
            guard state.bytes.hasEntry, state.version.info?.length == wanted.length,
                  state.handles.dataVersion == wanted.version else { return }
            openFiles.adopt(opened, for: owner)
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
            guard state.version.info == nil else { return false }
            switch state.version.probe {
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
            state.version.markListed()
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
        lock.withLock { $0.version.info != nil }
    }

    /// The content info, from the cache or the server; waits for a probe.
    /// `lookup`: asked before a cold file's first probe (`attributes(lookup:)`).
    public func contentInfo(lookup: () -> Reader = { .player }) throws -> ContentInfo {
        var (streaming, readsNext) = (false, false)
        if !entryPrepared.load(ordering: .relaxed) {
            // A lookup's probe brings the first bytes along (`startProbe`).
            let cold = lock.withLock { $0.version.info == nil && !$0.version.listed }
            if cold {
                // Off the lock: the classifier reads /proc.
                let reader = lookup()
                (streaming, readsNext) = (reader.streamsFromLookup, reader.readsAfterLookup)
                if firstBytesOfLookup(readsNext: readsNext) > 0 { prepareEntry() }
            }
        }
        let deadline = deadline(after: settings.timeout)
        return try lock.withScope { scope in
            while true {
                if let info = scope.state.version.info { return info }
                switch scope.state.version.probe {
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
                    startProbe(&scope.state, streams: streaming, readsNext: readsNext)
                }
            }
        }
    }

    /// What a lookup's probe fetches of the file. A segmented VOD's size is
    /// its parts' lengths: a stat sends one request per part at most, and
    /// none of the file's bytes unless the process that looks it up reads
    /// it next (`readsNext`) and the sizing would bring its segments' heads
    /// (an HTTP/1 origin's): then its first bytes come as any file's, and
    /// the sizing they wait on brings the heads (decision 0062).
    func firstBytesOfLookup(readsNext: Bool) -> Int64 {
        guard let segmented = context.segmented, segmented.serves(source.url) else { return settings.probeFirstBytes }
        return readsNext && segmented.sizingKeepsHeads(of: source.url) ? settings.probeFirstBytes : 0
    }

    /// `streams`: the lookup's process plays from the start; over HTTP its
    /// first bytes are asked open-ended (`adoptProbe`, decision 0061).
    /// `readsNext`: it reads the file next (`firstBytesOfLookup`).
    func startProbe(_ state: inout LoaderState, priority: FetchRequest.Priority = .read, streams: Bool = false,
                    readsNext: Bool = false, then settled: (@Sendable () -> Void)? = nil) {
        // The completion may run before `start` returns; it waits for the
        // lock held here, so the state below is set first.
        // A lookup's probe brings the first bytes along (FileLoader+Transfers.swift);
        // a listing's stays byte-frugal.
        let firstBytes = priority == .read && !state.version.listed ? firstBytesOfLookup(readsNext: readsNext) : 0
        // HTTP's own: a made-up head (SFTP, FTP) has no open-ended range.
        let openEnded = streams && firstBytes > 0 && fetcher.holdsTransfers(of: source.url)
            && MediaURL(source.url)?.isHTTP == true
        state.version.probeStarted(ContentProbe.start(url: source.url, fetcher: fetcher, clock: settings.clock, priority: priority,
                                                  firstBytes: firstBytes, openEnded: openEnded,
                                                  handover: { [self] info, id, head, askedAt in
            self.adoptProbe(info, id: id, head: head, limit: firstBytes, openEnded: openEnded, askedAt: askedAt)
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
        case .failure(let error) where error.errno == EIO && state.version.probeAttempts + 1 < settings.maxAttempts:
            // A transient failure (unreachable, 5xx): lookups waiting now,
            // or coming later, probe again after a backoff, bounded by their
            // timeout. No timer thread: nothing probes once nobody asks.
            if !logged { Log.warning("\(source.displayURL): \(error.message); retrying") }
            state.version.probeWillRetry(from: at, backoff: backoff(afterFailures:))
        case .failure(let error):
            if !logged { Log.error("\(source.displayURL): \(error.message)") }
            state.version.probeFailed(error, at: at)
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
            guard state.version.info == nil else { return }
            if case .running = state.version.probe { return }
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
        state.learned(learned, at: wallNow(), hasEntry: !cacheUnusable, readClasses: settings.readClasses)
    }

    /// Its record said only scans read it (a class its metadata may not hold yet).
    func markScanOnly() {
        lock.withLock { $0.markScanOnly() }
    }
}
