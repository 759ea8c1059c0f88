// What the mount shows: a tree of names. The root holds the sources, or,
// when the mount is of one directory source, is that directory; a
// directory source (an HTTP index today: any `Listing`) is listed on first
// lookup (the one lookup that waits for it) and again, in the background on
// the listings worker, once `dirCacheTime` has passed or the user asks:
// meanwhile, and while its server is down, lookups answer from the last
// listing (ListingService). A file in use is a FileLoader, one per
// URL however many names lead to it (two loaders on one cache entry would
// fight); an idle one is an EntryRecord, which answers stats and listings
// and is counted by the evictor, until a use makes its loader again. A
// listed entry of unknown size is probed without a loader (RecordProber):
// its answer goes into its record, so a scan that stats every file makes no
// loader. The maintenance's flusher persists metadata, turns idle loaders
// back into records and applies the cache limits (CatalogMaintenance).
// Opening a file may preload the next ones (Preloader). The catalog is the
// tree's lookups, and composes those parts over one shared `state`.
//
// Lock: `state` (CatalogState: the tree, loaders, records, probes under
// way, unsaved answers) is a `Locked`, so nothing reaches it without the
// lock. Taken before a loader's lock (to make, check or retire one), never
// after; never held while fetching a listing or calling into a loader that
// may wait. The network thread never waits for it: record probes' answers
// are taken on a worker of their own (RecordProber).
import CSystem
import Foundation
#if canImport(Glibc)
import Glibc
import MediaNetwork
import MediaSegmented
import MediaSources
import MediaStore
import MediaSupport
#endif

public final class Catalog: Sendable {
    /// How often changed metadata is written and the cache limits applied.
    public static let flushInterval: Double = 5
    /// How long a directory listing is believed before it is fetched again,
    /// unless the mount says otherwise (`--dir-cache-time`).
    public static let defaultDirCacheTime: Double = 300

    /// What opening a file preloads of the files after it, in source order.
    public struct PreloadNext: Sendable, Equatable {
        public var count: Int
        public var bytes: Int64
        public static let defaultBytes: Int64 = 4 << 20

        public init(count: Int, bytes: Int64 = PreloadNext.defaultBytes) {
            self.count = count
            self.bytes = bytes
        }
    }

    public enum Node {
        case file(FileLoader)
        case directory
    }

    /// A name in a directory's listing, with what lets the listing carry a
    /// file's attributes already known (readdirplus): its record's, or its
    /// loader's as they are when the entry is sent.
    public struct Entry {
        public let name: String
        public let isDirectory: Bool
        /// Weak: a listing kept open must not keep its loaders from
        /// becoming records (then the kernel asks getattr, which the
        /// record answers).
        public weak var loader: FileLoader?
        let recorded: (size: Int64, mtime: Int)?

        /// Size and mtime if known now, without waiting.
        public var knownAttributes: (size: Int64, mtime: Int)? { recorded ?? loader?.knownAttributes() }
    }

    typealias Directory = CatalogState.Directory

    public let statistics: Statistics
    /// Who reads what: an account per process and file (status --readers).
    public let readers: ReaderBook
    public let store: CacheStore
    /// Every request the mount makes: a VOD's (an archive member's) URL is
    /// served from its parts, any other goes to the fetcher beneath.
    let fetcher: SegmentedFetcher
    let settings: LoaderSettings
    /// The flusher, the evictor, the room under the limits.
    let maintenance: CatalogMaintenance
    /// Listed directories: their refreshes, saved copies, VODs, archives
    /// and health.
    let listingService: ListingService
    /// A listing's background probes and the worker their answers go to.
    let recordProber: RecordProber
    private let preloader: Preloader
    /// Validators older than this are checked on open; nil: never.
    private let revalidateAfter: Double?

    let state: Locked<CatalogState>
    /// Tells the kernel to drop what it holds of a URL's files (`start`):
    /// read on the network thread, under a loader's lock, so behind a lock
    /// of its own rather than the catalog's.
    private let changeHandler = Locked<ChangeHandler?>(nil)

    /// `fetcher`: the network (or a test's stand-in); the catalog serves the
    /// VODs among `sources`, and those its listings find, over it.
    /// `sourceIsRoot`: `sources` is one directory (`Source.isMountRoot`),
    /// whose entries are the mount root, listed as any directory is; else
    /// the root holds one name per source.
    public init(sources: [Source], sourceIsRoot: Bool = false, store: CacheStore, fetcher: Fetching,
                settings: LoaderSettings, http: HTTPOptions = HTTPOptions(), preloadNext: PreloadNext? = nil,
                limits: CacheLimits? = nil, revalidateAfter: Double? = 60,
                dirCacheTime: Double = Catalog.defaultDirCacheTime, listingDoubt: ListingDoubt = ListingDoubt(),
                statistics: Statistics? = nil,
                hlsVariant: HLSListing.VariantChoice = .highest, readAgain: [any Listing] = [], archives: Bool = true,
                poll: PollSchedule? = nil) {
        precondition(!sourceIsRoot || (sources.count == 1 && sources[0].isDirectory),
                     "only one directory source can be the mount root")
        let statistics = statistics ?? Statistics(clock: settings.clock)
        self.statistics = statistics
        readers = ReaderBook(clock: settings.clock)
        self.store = store
        self.fetcher = SegmentedFetcher(clock: settings.clock, base: fetcher, vods: sources.compactMap(\.vod), store: store)
        self.settings = settings
        self.revalidateAfter = revalidateAfter
        // The flusher and the room under the limits come first: the
        // loaders' context carries the budget, and the state its context.
        let flusher = Flusher(interval: Catalog.flushInterval, clock: settings.clock)
        let budget = CatalogMaintenance.budget(for: limits, waking: flusher)
        let context = LoaderContext(store: store, fetcher: self.fetcher, settings: settings, statistics: statistics,
                                    budget: budget, openFiles: OpenDataFiles(capacity: OpenDataFiles.defaultCapacity),
                                    segmented: self.fetcher)
        // Every loader that comes to stand for a URL has its changes reach
        // the kernel under every name of it.
        let changeHandler = self.changeHandler
        var initial = CatalogState(store: store, context: context, tracksMembership: limits != nil,
                                   listedRoot: sourceIsRoot ? sources[0] : nil) { loader in
            Catalog.watchChanges(of: loader, through: changeHandler)
        }
        // The entries' metadata, read in parallel: a remount of 100,000
        // entries reads 100,000 small files, and the disk serves several
        // at once. Nothing else touches the cache before `start`. No
        // loader is made: most entries of a big mount are only ever stat'ed.
        store.openAnswers(maxAge: limits?.maxAgePartial, now: settings.clock.wall())
        var seen = Set<String>()
        let urls = sources.filter { !$0.isDirectory && seen.insert($0.url).inserted }.map(\.url)
        initial.keep(records: CatalogState.loadRecords(urls, from: store), of: urls)
        for source in sources where !sourceIsRoot { _ = initial.insert(source, into: initial.root) }
        let state = Locked(initial, rank: .catalogState)
        self.state = state
        maintenance = CatalogMaintenance(flusher: flusher, budget: budget, limits: limits, state: state, store: store,
                                         statistics: statistics, clock: settings.clock)
        var listingContext = ListingContext(clock: settings.clock, http: http, timeout: Int(settings.timeout))
        // A VOD a listing finds is chosen as the arguments' are.
        listingContext.hlsVariant = hlsVariant
        let wakeFlusher: @Sendable () -> Void = { flusher.wake() }
        let segmented = self.fetcher
        let poller = poll.map { ChangePoller(settings: $0, fetcher: segmented, clock: settings.clock,
                                             timeout: settings.timeout) }
        listingService = ListingService(context: listingContext, dirCacheTime: dirCacheTime, doubt: listingDoubt,
                                        readAgain: readAgain,
                                        archives: archives, state: state, store: store, fetcher: self.fetcher,
                                        settings: settings, poller: poller, wakeFlusher: wakeFlusher)
        recordProber = RecordProber(state: state, fetcher: self.fetcher, settings: settings, wakeFlusher: wakeFlusher)
        preloader = Preloader(next: preloadNext, state: state)
    }

    /// Has a change of the loader's file reach the kernel under every name
    /// of its URL; the loader hears when the kernel has dropped its pages.
    private static func watchChanges(of loader: FileLoader, through changeHandler: Locked<ChangeHandler?>) {
        let url = loader.source.url
        loader.onChange = { [weak loader] generation in
            guard let handler = changeHandler.withLock({ $0 }) else { return false }
            let target = CatalogState.WeakLoader(loader)
            return handler(url) { dropped in
                if dropped { target.loader?.kernelForgot(generation: generation) }
            }
        }
    }

    /// Asked (on any thread, maybe under a loader's lock: it must not wait)
    /// to have the kernel drop what it holds of a URL's files; true when
    /// it will, and then calls back, with whether every name was dropped.
    public typealias ChangeHandler = @Sendable (_ url: String, _ done: @escaping @Sendable (Bool) -> Void) -> Bool

    /// Every path in the mount whose name leads to one of `urls` (a change
    /// or a purge must reach the kernel's inode of each).
    public func paths(of urls: Set<String>) -> [String] {
        state.withLock { $0.paths(of: urls) }
    }

    /// Starts the background thread that persists metadata and applies the
    /// cache limits (at once, then every `flushInterval`). `onChange` hears
    /// of files (by URL) whose remote content changed; without it no kernel
    /// holds their pages; `names` tells it of the names relistings and
    /// root edits add, remove or change.
    public func start(onChange: ChangeHandler? = nil, names: NameTeller? = nil) {
        changeHandler.withLock { $0 = onChange }
        listingService.teller.withLock { $0 = names }
        let (listingService, recordProber) = (self.listingService, self.recordProber)
        listingService.poller?.start { directory, seen in listingService.relistChanged(directory, seen: seen) }
        let allowance = settings.backgroundDaily
        maintenance.start(readAgain: {
            listingService.readSavedAgainIfDue()
            allowance?.save()
        }, probesDrained: { recordProber.feeder.takeDrained() })
    }

    /// Stops and joins the background threads, ends the network, and
    /// persists everything; call before exit. Safe to call twice.
    public func stop() {
        maintenance.flusher.stop()
        listingService.poller?.stop()
        recordProber.stop()
        listingService.stop()
        preloader.stop()
        fetcher.shutdown()
        maintenance.flushAll()
        maintenance.saveUnsaved(until: .distantFuture)
        settings.backgroundDaily?.save()
        store.stop()
    }

    /// The loaders live now (files in use); the others are records.
    public var allLoaders: [FileLoader] {
        state.withLock { Array($0.loaders.values) }
    }

    /// The mount's files, and what they hold in the cache: loaders and records.
    public func cacheUsage() -> (entries: Int, entriesWithBytes: Int, cachedBytes: Int64) {
        var (withBytes, cached) = (0, Int64(0))
        let (live, entries) = state.withLock { state in
            for record in state.records.values where record.cachedBytes > 0 {
                withBytes += 1
                cached = cached.addingSaturating(record.cachedBytes)
            }
            return (Array(state.loaders.values), state.loaders.count + state.records.count)
        }
        for loader in live {
            let bytes = loader.status().cachedBytes
            if bytes > 0 { withBytes += 1 }
            cached = cached.addingSaturating(bytes)
        }
        return (entries, withBytes, cached)
    }

    public func flushAll() {
        maintenance.flushAll()
    }

    // MARK: The tree

    private func components(_ path: String) -> [String] {
        path.split(separator: "/").map(String.init)
    }

    /// The directory at `path`, listed if it is due. ENOENT, ENOTDIR as a
    /// file system would say.
    func directory(at parts: some Collection<String>) throws -> Directory {
        var current = state.withLock { $0.root }
        for part in parts {
            try listingService.listIfDue(current)
            let directory = current
            switch state.withLock({ $0.child(part, of: directory) }) {
            case .directory(let next)?: current = next
            case .file?: throw MediaError(ENOTDIR, "not a directory")
            case nil: throw MediaError(ENOENT, "no such file or directory")
            }
        }
        try listingService.listIfDue(current)
        return current
    }

    /// What a path names: the root, a directory or a file.
    public func node(at path: String) throws -> Node {
        var parts = components(path)
        guard let last = parts.popLast() else { return .directory }
        let parent = try directory(at: parts)
        let filePath = parent.path + "/" + last
        let found: (child: CatalogState.Child?, loader: FileLoader?) = state.withLock { state in
            let child = state.child(last, of: parent)
            guard case .file(let url)? = child else { return (child, nil) }
            return (child, state.liveLoader(url: url, path: filePath))
        }
        switch found.child {
        case .directory(let directory)?:
            try listingService.listIfDue(directory)
            return .directory
        case .file?:
            guard let loader = found.loader else { throw MediaError(ENOENT, "no such file") }
            return .file(loader)
        case nil:
            throw MediaError(ENOENT, "no such file or directory")
        }
    }

    /// For getattr: nil for a directory, else a file's size and mtime. A
    /// file without a loader whose record knows them answers from it: no
    /// loader is made and the disk is not read. Otherwise its loader
    /// answers, waiting on a probe if need be; `lookup` (who asks) is
    /// asked before a cold file's first probe (`FileLoader.attributes(lookup:)`).
    public func attributes(at path: String, lookup: () -> Reader = { .player }) throws -> (size: Int64, mtime: Int)? {
        var parts = components(path)
        guard let last = parts.popLast() else { return nil }
        let parent = try directory(at: parts)
        let path = parent.path + "/" + last
        let (child, known, loader, probe) = state.withLock { state in
            let child = state.child(last, of: parent)
            var known: (size: Int64, mtime: Int)?
            var loader: FileLoader?
            var probe: (RecordProbe, new: Bool)?
            if case .file(let url)? = child {
                if state.loaders[url] == nil, let record = state.records[url] {
                    known = record.attributes
                    if known == nil && record.listed {
                        // A listed entry's stat overtook its background probe.
                        probe = state.beginRecordProbe(of: url, clock: settings.clock).map { ($0.probe, $0.isNew) }
                    }
                }
                if known == nil && probe == nil { loader = state.liveLoader(url: url, path: path) }
            }
            return (child, known, loader, probe)
        }
        switch child {
        case .directory(let directory)?:
            try listingService.listIfDue(directory)
            return nil
        case .file(let url)?:
            if let known { return known }
            if let (probe, new) = probe {
                if new {
                    recordProber.startRecordProbe(probe, url: url, priority: .read)
                } else {
                    probe.promote()
                }
                return try recordProber.awaitRecordProbe(probe, url: url, path: path)
            }
            guard let loader else { throw MediaError(ENOENT, "no such file") }
            return try loader.attributes(lookup: lookup)
        case nil:
            throw MediaError(ENOENT, "no such file or directory")
        }
    }

    /// The file at `path`; EISDIR for a directory.
    public func file(at path: String) throws -> FileLoader {
        guard case .file(let loader) = try node(at: path) else { throw MediaError(EISDIR, "is a directory") }
        return loader
    }

    /// The names in a directory, in order, with whether each is a directory.
    /// A listing is usually followed by a stat of every entry (`ls -l`, a
    /// media server's scan): the entries whose size is not known yet are
    /// probed in the background, in order, a bounded number in parallel
    /// (`ProbeFeeder`), so the stats wait for about one round trip, not one
    /// each. Those without a loader are probed into their records.
    public func list(_ path: String) throws -> [Entry] {
        let parts = components(path)
        let directory: Directory
        do {
            directory = try self.directory(at: parts)
        } catch let error as MediaError where error.errno == ENOENT && parts.isEmpty {
            // A listed root whose source is gone (a 404, no such bucket):
            // readdir's ENOENT reads as the directory's end (glibc), an
            // empty mount that hides the failure.
            throw MediaError(EIO, error.message)
        }
        let (entries, unknown) = state.withLock { state in
            var unknown: [String] = []
            let entries = state.children(of: directory).map { name, child -> Entry in
                switch child {
                case .directory:
                    return Entry(name: name, isDirectory: true, loader: nil, recorded: nil)
                case .file(let url):
                    if let loader = state.loaders[url] {
                        if loader.markListed() { unknown.append(url) }
                        return Entry(name: name, isDirectory: false, loader: loader, recorded: nil)
                    }
                    if let known = state.records[url]?.attributes {
                        return Entry(name: name, isDirectory: false, loader: nil, recorded: known)
                    }
                    // Unknown attributes are probed in the background, into the record.
                    if state.markListed(url) { unknown.append(url) }
                    return Entry(name: name, isDirectory: false, loader: nil, recorded: nil)
                }
            }
            return (entries, unknown)
        }
        recordProber.add(unknown)
        return entries
    }

    /// The names of a directory's subdirectories, listed if due; unlike
    /// `list`, nothing is probed (a recursive refresh walks a library).
    func subdirectories(of path: String) throws -> [String] {
        let directory = try self.directory(at: components(path))
        return state.withLock { state in
            state.children(of: directory).compactMap { name, child in
                if case .directory = child { return name }
                return nil
            }
        }
    }

    /// Names in the mount root, in source order (a listed root's as listed
    /// so far, then those added).
    public var names: [String] {
        state.withLock { $0.names(of: $0.root) }
    }

    /// The URL of the directory source whose entries are the root, for
    /// logs (credentials removed); nil when the root holds the sources.
    public var rootListingURL: String? {
        state.withLock { $0.root.url }.map(MediaError.redacted)
    }

    /// `user.mediafs.refresh` on a listed directory: lists it again now and
    /// returns once it is done (ListingService.refresh); EINVAL for any
    /// other directory.
    public func refresh(_ path: String) throws {
        let directory = try directory(at: components(path))
        try listingService.refresh(directory, shown: path.isEmpty ? "/" : path)
    }

    /// Returns once the kernel heard of every name change made so far
    /// (bounded), so a stat after it sees them: for a caller outside any
    /// FUSE request (the remote control), since a refresh through an
    /// xattr answers while the kernel holds the directory that news needs.
    public func waitUntilKernelTold() {
        listingService.waitUntilTold()
    }

    // MARK: Runtime sources

    /// Adds a URL to the mount root at run time; returns its name. At a
    /// listed root it stays through relistings, after the listing's names.
    public func add(url: String) throws -> String {
        let trimmed = String(url.trimmingSpaces)
        try Source.validate(url: trimmed, origin: "user.mediafs.add")
        let source = Source.at(url: trimmed)
        let (name, loader) = state.withLock { state in
            let name = state.addToRoot(source)
            let known = source.isDirectory || state.records[trimmed]?.attributes != nil
            return (name, known ? nil : state.liveLoader(url: trimmed, path: "/" + name))
        }
        loader?.prefetchInfo()
        // The kernel may hold the name as missing (a stat before the add).
        listingService.tell(NameChanges(directory: "", added: [name]))
        Log.info("added \(MediaError.redacted(trimmed)) as \(name)")
        return name
    }

    /// Removes a name from the mount root; its cached bytes stay cached.
    /// At a listed root only an added name can go (EROFS for a listed one).
    public func remove(name: String) throws {
        let trimmed = String(name.trimmingSpaces)
        let dropped = try state.withLock { try $0.removeFromRoot(trimmed) }
        FileLoader.settle(dropped)
        listingService.tell(NameChanges(directory: "", removed: [trimmed]))
        Log.info("removed \(trimmed)")
    }

    // MARK: Opening

    /// A file is being opened: check its validators when they are due.
    /// Returns whether the file changed, so the kernel's idea of it must be
    /// dropped before the open is answered.
    public func willOpen(_ loader: FileLoader) throws -> Bool {
        _ = try loader.contentInfo()
        guard let revalidateAfter else { return false }
        return loader.revalidate(olderThan: revalidateAfter)
    }

    /// A file was opened: preload the leading bytes of the next files in
    /// its directory, as a feed does so the next item starts at once.
    public func opened(_ path: String) {
        guard preloader.next != nil else { return }
        var parts = components(path)
        guard let name = parts.popLast(), let parent = try? directory(at: parts) else { return }
        preloader.opened(name, in: parent)
    }

    // MARK: The whole mount

    /// Drops every cached byte of the mount's files (a record with bytes
    /// gets its loader to do it); returns the URLs whose pages the kernel
    /// must drop.
    public func purgeAll() -> [String] {
        let targets: [FileLoader] = state.withLock { state in
            var targets = Array(state.loaders.values)
            for (path, url) in state.files() {
                if let record = state.records[url], record.cachedBytes > 0,
                   let loader = state.liveLoader(url: url, path: path) {
                    targets.append(loader)
                }
            }
            return targets
        }
        for loader in targets { loader.purge() }
        return targets.map(\.source.url)
    }

    /// For statfs: the cache's room and what this mount's files hold of it.
    public func usage() -> (capacity: Int64, used: Int64, available: Int64) {
        let cached = cacheUsage().cachedBytes
        let available = store.freeBytes() ?? 0
        return (cached.addingSaturating(available), cached, available)
    }

    /// The root's `stats`: one JSON object, through a real encoder.
    public func statsJSON() -> String {
        let counters = statistics.snapshot
        let usage = cacheUsage()
        let (eviction, loaders) = state.withLock { ($0.lastEviction, Array($0.loaders.values) + $0.retiredInUse) }
        let openHandles = loaders.reduce(0) { $0 + Int64($1.openHandles) }
        let stats = Stats(entries: Int64(usage.entries), cachedBytes: usage.cachedBytes,
                          cacheMaxSize: maintenance.evictor?.limits.maxSize ?? 0, pinnedBytes: eviction.pinnedBytes,
                          pinnedOverLimit: eviction.pinnedOverLimit, cacheNoRoom: eviction.noDiskRoom,
                          cacheFreeBytes: eviction.freeBytes, cacheMinFree: maintenance.evictor?.limits.minFree,
                          bytesFromCache: counters.bytesFromCache,
                          bytesFromNetwork: counters.bytesFromNetwork, requests: counters.requests,
                          transfersInFlight: counters.transfersInFlight, kernelReadOpens: counters.kernelReadOpens,
                          attributeRequests: counters.attributeRequests,
                          kernelEntryNotifications: counters.kernelEntryNotifications, openHandles: openHandles,
                          playBytesFetched: counters.fetchedByClass[ReadClass.play.rawValue],
                          scanBytesFetched: counters.fetchedByClass[ReadClass.scan.rawValue],
                          playBytesServed: counters.servedByClass[ReadClass.play.rawValue],
                          scanBytesServed: counters.servedByClass[ReadClass.scan.rawValue],
                          backgroundBytesFetched: counters.fetchedByClass[ReadClass.background.rawValue],
                          backgroundBytesServed: counters.servedByClass[ReadClass.background.rawValue],
                          backgroundDailyUsed: settings.backgroundDaily?.usedToday,
                          backgroundDailyLimit: settings.backgroundDaily?.bytesPerDay,
                          graceResumes: counters.graceResumes, transfersYielded: counters.transfersYielded,
                          scanReadsDelayed: counters.scanReadsDelayed, lookaheadRequests: counters.lookaheadFetches,
                          streamsAhead: counters.streamsAhead,
                          limitPasses: Int64(maintenance.budget?.counts.passes ?? 0),
                          roomWaitsUnanswered: Int64(maintenance.budget?.counts.unansweredWaits ?? 0))
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = .sortedKeys
        // Numbers and a Bool: encoding cannot fail.
        return (try? encoder.encode(stats)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    /// The root's `sources`: each listed or read-again source's health,
    /// as a JSON array in origin order.
    public func sourcesJSON() -> String {
        let all = listingService.sourceHealth
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(all)).map { String(decoding: $0, as: UTF8.self) } ?? "[]"
    }

    /// What `stats` says, its keys in snake case.
    private struct Stats: Encodable {
        var entries, cachedBytes, cacheMaxSize, pinnedBytes: Int64
        var pinnedOverLimit: Bool
        /// The disk leaves no room under `--cache-min-free`: reads pass
        /// through uncached. With the disk's free bytes at the last pass and
        /// the limit (absent without limits).
        var cacheNoRoom: Bool
        var cacheFreeBytes, cacheMinFree: Int64?
        var bytesFromCache, bytesFromNetwork, requests, transfersInFlight, kernelReadOpens, attributeRequests: Int64
        /// Entries of relisted names the kernel was told to drop (decision 0051).
        var kernelEntryNotifications: Int64
        /// Handles of the mount's files open now, as far as the daemon has
        /// heard: the kernel sends a close's release after close(2) returns.
        var openHandles: Int64
        /// By read class: bytes received for its reads (a lookup's first
        /// bytes count as a scan's) and bytes its reads returned.
        var playBytesFetched, scanBytesFetched, playBytesServed, scanBytesServed: Int64
        var backgroundBytesFetched, backgroundBytesServed: Int64
        /// `--background-daily`: background bytes fetched today (UTC) and the cap; absent without one.
        var backgroundDailyUsed, backgroundDailyLimit: Int64?
        /// Opens that went on with a closed handle's pattern and transfers.
        var graceResumes: Int64
        /// Held long transfers that gave their connection to a waiting read.
        var transfersYielded: Int64
        /// Scan reads that waited for a place while players' transfers ran or waited.
        var scanReadsDelayed: Int64
        /// Requests the container lookahead sent (FileLoader+Lookahead.swift).
        var lookaheadRequests: Int64
        /// Players' streams started at their first read, ahead of it.
        var streamsAhead: Int64
        /// Passes of the cache limits that measured the room (tests wait
        /// on it), and reads whose wait for room no pass answered.
        var limitPasses, roomWaitsUnanswered: Int64
    }
}
