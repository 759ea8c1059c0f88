// What the mount shows: a tree of names. The root holds the sources; a
// source URL ending in `/` is a directory whose HTTP index is fetched on
// first lookup (the one lookup that waits for it) and again, in the
// background on the listings worker, once `dirCacheTime` has passed or the
// user asks: meanwhile, and while its server is down, lookups answer from
// the last listing. A file in use is a FileLoader, one per URL however many
// names lead to it (two loaders on one cache entry would fight); an idle one
// is an EntryRecord, which answers stats and listings and is counted by the
// evictor, until a use makes its loader again. A listed entry of unknown
// size is probed without a loader (RecordProbe): its answer goes into its
// record, so a scan that stats every file makes no loader. The FUSE adapter talks only
// to this type. It also owns the background thread that persists metadata,
// turns idle loaders back into records and applies the cache limits.
//
// Lock: `lock` guards the tree (`root` and every Directory below it), the
// loaders and records, and the last eviction report. Taken before a
// loader's `lock` (to make, check or retire one), never after; never held
// while fetching a listing or calling into a loader that may wait.
import CSystem
import Foundation
#if canImport(Glibc)
import Glibc
#endif

public final class Catalog: @unchecked Sendable {
    /// How often changed metadata is written and the cache limits applied.
    public static let flushInterval: Double = 5
    /// How long a directory listing is believed before it is fetched again,
    /// unless the mount says otherwise (`--dir-cache-time`).
    public static let defaultDirCacheTime: Double = 300
    /// A listing that failed to refresh is tried again after this long (or
    /// the directory cache time, when shorter); its old listing is served.
    public static let listingRetry: Double = 30
    /// Loaders turned into records in one pass past which the heap's holes
    /// are given back (a listing's probed entries, about 1 KiB each).
    static let trimAfterRetiring = 1_000
    static let trimDuringPass = 10_000
    /// Probe answers saved between two looks at the catalog's lock; the
    /// flusher is woken when this many wait (AnswerJournal: a few µs each).
    static let saveBatch = 512
    /// With loaders to turn into records, the flusher comes back this often.
    static let backlogInterval: Double = 1
    /// With answers waiting, it comes back this soon.
    static let saveSlice: Double = 0.5

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

    /// A directory of the mount: its names in order, and for a listed one,
    /// the URL, when it was listed and when it is listed again. Sendable
    /// because every var is touched only under the catalog's `lock`, so the
    /// listings worker may hold one.
    final class Directory: @unchecked Sendable {
        let url: String?
        /// Its path in the mount, "" for the root.
        let path: String
        var order: [String] = []
        var children: [String: Child] = [:]
        var naming = FileNaming()
        /// When the listing in use was fetched; nil: never (a lookup waits).
        var listedAt: Double?
        /// When a lookup should have it fetched again, in the background.
        var refreshAt = 0.0
        /// A background refresh is queued or running.
        var refreshing = false

        init(url: String?, path: String) {
            self.url = url
            self.path = path
        }

        func add(_ name: String, _ child: Child) -> String {
            let unique = naming.claim(name) { children[$0] != nil }
            order.append(unique)
            children[unique] = child
            return unique
        }
    }

    enum Child {
        case file(String)
        case directory(Directory)

        /// What a child is, for telling whether a new listing kept it.
        var identity: String {
            switch self {
            case .file(let url): return url
            case .directory(let directory): return "\(ObjectIdentifier(directory))"
            }
        }
    }

    /// A probe's answer not saved yet: the rest of its metadata is the
    /// record's (no bytes; its last access and pin). Kept apart from the
    /// record, 80 bytes a bucket where a whole EntryMeta took 128, until
    /// the flusher appends it to the store's AnswerJournal.
    struct ProbeAnswer {
        var info: ContentInfo
        var validated: Int64

        func meta(url: String, record: EntryRecord?) -> EntryMeta {
            EntryMeta(url: url, info: info, present: ByteRangeSet(),
                      lastAccess: record.map { Int64($0.lastAccess) } ?? validated, lastValidated: validated,
                      pinned: record?.isPinned ?? false)
        }
    }

    final class WeakLoader: @unchecked Sendable {
        weak var loader: FileLoader?
        init(_ loader: FileLoader?) { self.loader = loader }
    }

    public let statistics: Statistics
    public let store: CacheStore
    private let fetcher: Fetching
    private let settings: LoaderSettings
    private let http: HTTPOptions
    private let preloadNext: PreloadNext?
    private let evictor: CacheEvictor?
    /// Room under the limits for new bytes, so they hold at every instant.
    private let budget: CacheBudget?
    /// What every loader shares, with the data files open at once (a few
    /// hundred however many entries).
    private let context: LoaderContext
    /// Validators older than this are checked on open; nil: never.
    private let revalidateAfter: Double?
    /// How long a listing is believed before it is fetched again.
    private let dirCacheTime: Double

    private let lock = NSLock()
    private let root = Directory(url: nil, path: "")
    /// Every URL a name leads to has a loader here or a record in `records`,
    /// never both.
    private var loaders: [String: FileLoader] = [:]
    private var records: [String: EntryRecord] = [:]
    /// Probe answers of loaders turned into records before their metadata
    /// was saved (a listing's entries), and those being saved now: a
    /// loader made meanwhile starts from them. Saved by the flusher into
    /// the journal, with no sync (they claim no bytes), so loaders need
    /// not wait for it.
    private var unsaved: [String: ProbeAnswer] = [:]
    private var saving: [String: EntryMeta] = [:]
    /// Probes of listed entries that have no loader, by URL, while they
    /// run, and failed ones until a stat hands the failure to a loader.
    private var probing: [String: RecordProbe] = [:]
    /// Loaders of URLs no name leads to any more (a listing dropped them,
    /// or `remove`), held weakly: one an open handle or a transfer still
    /// uses is taken back if the URL returns, so one URL never has two.
    private var retired: [String: WeakLoader] = [:]
    /// URLs that joined or left the mount since the evictor's last pass,
    /// which it needs to follow the entries of no mounted file without a
    /// copy of every URL (4 MiB at 100,000).
    private var membershipChanged: [String] = []
    /// Tells the kernel to drop what it holds of a URL's files (`start`):
    /// read on the network thread, under a loader's lock, so behind a lock
    /// of its own rather than the catalog's.
    private let changeHandler = Locked<ChangeHandler?>(nil)
    /// The last pass of the cache limits, for `stats` and to log a change
    /// in whether pinned bytes alone exceed the limit.
    private var lastEviction = CacheEvictor.Report()

    /// Guards `stopped` and `flusherRunning`; the flusher waits on it.
    private let stopping = Condition()
    private var stopped = false
    private var flusherRunning = false
    /// Preloads of the next files, off the opener's thread.
    private let preloads = Worker(name: "mediafs-preload")
    /// Refreshes of listings, off the lookups' threads: one at a time.
    private let listings = Worker(name: "mediafs-listings")
    /// A listing's background probes, a bounded number at a time.
    private let feeder = ProbeFeeder()

    public init(sources: [Source], store: CacheStore, fetcher: Fetching, settings: LoaderSettings,
                http: HTTPOptions = HTTPOptions(), preloadNext: PreloadNext? = nil, limits: CacheLimits? = nil,
                revalidateAfter: Double? = 60, dirCacheTime: Double = Catalog.defaultDirCacheTime,
                statistics: Statistics = Statistics()) {
        self.statistics = statistics
        self.store = store
        self.fetcher = fetcher
        self.settings = settings
        self.http = http
        self.preloadNext = preloadNext
        self.revalidateAfter = revalidateAfter
        self.dirCacheTime = dirCacheTime
        evictor = limits.map { CacheEvictor(store: store, limits: $0) }
        let stopping = self.stopping
        let budget = limits.map { _ in
            CacheBudget {
                stopping.lock()
                stopping.broadcast()
                stopping.unlock()
            }
        }
        self.budget = budget
        context = LoaderContext(store: store, fetcher: fetcher, settings: settings, statistics: statistics,
                                budget: budget, openFiles: OpenDataFiles(capacity: OpenDataFiles.defaultCapacity))
        // The entries' metadata, read in parallel: a remount of 100,000
        // entries reads 100,000 small files, and the disk serves several
        // at once. Nothing else touches the cache before `start`. No
        // loader is made: most entries of a big mount are only ever stat'ed.
        store.openAnswers(maxAge: limits?.maxAgePartial)
        var seen = Set<String>()
        let urls = sources.filter { !$0.isDirectory && seen.insert($0.url).inserted }.map(\.url)
        records.reserveCapacity(urls.count)
        for (url, record) in zip(urls, Self.loadRecords(urls, from: store)) { records[url] = record }
        for source in sources { _ = insert(source, into: root) }
        feeder.starting(with: { [weak self] url, settled in self?.probeListed(url, then: settled) ?? false },
                        whenDrained: { [weak self] in self?.wakeFlushing() })
    }

    /// The record of each URL's metadata, in order, on a few threads.
    private static func loadRecords(_ urls: [String], from store: CacheStore) -> [EntryRecord?] {
        let threads = urls.count < 256 ? 1 : 8
        let results = UnsafeMutableBufferPointer<EntryRecord?>.allocate(capacity: urls.count)
        results.initialize(repeating: nil)
        defer { results.deallocate() }
        nonisolated(unsafe) let shared = results
        DispatchQueue.concurrentPerform(iterations: threads) { part in
            // Each thread writes only its own indexes.
            for index in stride(from: part, to: urls.count, by: threads) {
                shared[index] = EntryRecord(meta: store.loadMeta(forKey: urls[index]), store: store)
            }
        }
        let array = Array(results)
        results.deinitialize()
        return array
    }

    /// Adds a source to a directory under its name (made unique); returns
    /// the name. A file new to the mount gets a record of its metadata (read
    /// under `lock`, see `liveLoader`), or back the loader it had, if that
    /// is still in use. Call with `lock` held, or before the mount runs.
    private func insert(_ source: Source, into directory: Directory, read: EntryRecord? = nil) -> String {
        if source.isDirectory {
            let name = directory.naming.peek(source.name) { directory.children[$0] != nil }
            return directory.add(source.name, .directory(Directory(url: source.url, path: directory.path + "/" + name)))
        }
        let name = directory.add(source.name, .file(source.url))
        let url = source.url
        if loaders[url] == nil && records[url] == nil {
            noteMembership(url)
            if let loader = retired.removeValue(forKey: url)?.loader {
                watchChanges(of: loader)
                loaders[url] = loader
            } else {
                records[url] = read ?? EntryRecord(meta: store.loadMeta(forKey: url), store: store)
            }
        }
        return name
    }

    /// The loader of a mounted URL, made from the cache if only its record
    /// was kept; nil when no name leads to the URL. Call with `lock` held:
    /// the loader reads the entry's metadata under it, and the evictor
    /// removes an entry only under it and while no loader stands for it, so
    /// no loader claims bytes from a directory moved to the trash.
    private func liveLoader(url: String, path: String) -> FileLoader? {
        if let loader = loaders[url] { return loader }
        guard let record = records.removeValue(forKey: url) else { return nil }
        let pending = unsaved.removeValue(forKey: url)?.meta(url: url, record: record) ?? saving[url]
        let preloaded: EntryMeta?? = pending.map { .some($0) } ?? (record.hasMeta ? nil : .some(nil))
        // One in use elsewhere would otherwise be a second loader on the entry.
        let loader = retired.removeValue(forKey: url)?.loader
            ?? FileLoader(source: Source(name: path, url: url), context: context, meta: preloaded)
        if record.listed { _ = loader.markListed() }
        // It saves its metadata itself from now on.
        if pending != nil { loader.markUnsaved() }
        watchChanges(of: loader)
        loaders[url] = loader
        return loader
    }

    /// Has a change of the loader's file reach the kernel under every name
    /// of its URL; the loader hears when the kernel has dropped its pages.
    private func watchChanges(of loader: FileLoader) {
        let url = loader.source.url
        loader.onChange = { [weak self, weak loader] generation in
            guard let handler = self?.changeHandler.withLock({ $0 }) else { return false }
            let target = WeakLoader(loader)
            return handler(url) { dropped in
                if dropped { target.loader?.kernelForgot(generation: generation) }
            }
        }
    }

    /// Every path in the mount whose name leads to one of `urls` (a change
    /// or a purge must reach the kernel's inode of each).
    public func paths(of urls: Set<String>) -> [String] {
        lock.lock()
        defer { lock.unlock() }
        var found: [String] = []
        func walk(_ directory: Directory) {
            for (name, child) in directory.children {
                switch child {
                case .file(let url) where urls.contains(url): found.append(directory.path + "/" + name)
                case .file: break
                case .directory(let sub): walk(sub)
                }
            }
        }
        walk(root)
        return found
    }

    /// The flusher's pass over the loaders: each one's metadata saved
    /// (unless `flushing` is false), then, when nothing else holds it (no
    /// open handle, queued probe, preload or listing) and nothing is in
    /// flight, it is turned into a record. One at a time, so a pass over a
    /// listing's 100,000 probed entries frees them as it goes. A loader
    /// something else holds stays live, so a record never misses what it
    /// did since. Returns how many became records.
    @discardableResult
    func flushAndRetire(flushing: Bool = true) -> Int {
        lock.lock()
        let urls = Array(loaders.keys)
        let retiredInUse = retired.values.compactMap(\.loader)
        lock.unlock()
        if flushing { for loader in retiredInUse { loader.flush() } }
        var count = 0
        for url in urls {
            // A probe's unsaved answer goes with the record: saving it
            // first would hold a listing's loaders for the whole pass.
            guard retireIfIdle(url) || flushing && flushLoader(of: url) && retireIfIdle(url) else { continue }
            count += 1
            // Saving a listing's probed entries takes seconds: what they
            // held is given back as the pass goes, not only at its end.
            if count % Self.trimDuringPass == 0 { mediafs_malloc_trim() }
        }
        if count > 0 { Log.debug("\(count) of \(urls.count) loaders idle: kept as records") }
        return count
    }

    /// Returns holding no reference to the loader; false when it has none.
    @inline(never)
    private func flushLoader(of url: String) -> Bool {
        lock.lock()
        let loader = loaders[url]
        lock.unlock()
        loader?.flush()
        return loader != nil
    }

    private func retireIfIdle(_ url: String) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        // Out of the dictionary, so that only this reference counts.
        guard var loader = loaders.removeValue(forKey: url) else { return false }
        guard isKnownUniquelyReferenced(&loader), let idle = loader.idleRecord() else {
            loaders[url] = loader
            return false
        }
        // Unique and idle under `lock`: nothing changes its data file now.
        var record = idle.record
        if record.cachedBytes > 0 { record.allocatedBytes = EntryRecord.allocatedBytes(forKey: url, in: store) }
        records[url] = record
        if let meta = idle.unsaved { unsaved[url] = ProbeAnswer(info: meta.info, validated: meta.lastValidated) }
        return true
    }

    /// Saves the probe answers kept with records, a batch at a time, until
    /// `deadline`. A loader made for one while it is written starts from
    /// it, and saves its own again after: the last save is the loader's.
    @discardableResult
    func saveUnsaved(until deadline: Deadline) -> Int {
        var saved = 0
        while !deadline.hasPassed {
            lock.lock()
            var batch: [(url: String, meta: EntryMeta)] = []
            for (url, answer) in unsaved {
                batch.append((url, answer.meta(url: url, record: records[url])))
                if batch.count == Self.saveBatch { break }
            }
            for entry in batch {
                unsaved[entry.url] = nil
                saving[entry.url] = entry.meta
            }
            // Emptied, it gives its buckets back (16 MiB at 100,000).
            if unsaved.isEmpty { unsaved = [:] }
            lock.unlock()
            guard !batch.isEmpty else { return saved }
            saved += batch.count
            do {
                try store.saveAnswers(batch.map(\.meta))
            } catch {
                // Costs probes at the next mount, as a failed flush would.
                statistics.cacheWriteFailed(error as? MediaError ?? MediaError.io("\(error)"))
            }
            lock.lock()
            for entry in batch {
                saving[entry.url] = nil
                loaders[entry.url]?.markUnsaved()
            }
            lock.unlock()
        }
        return saved
    }

    /// Wakes the flusher before its time.
    private func wakeFlushing() {
        stopping.lock()
        stopping.broadcast()
        stopping.unlock()
    }

    /// Probe answers waiting to be saved.
    private var unsavedCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return unsaved.count
    }

    /// Whether the flusher should come back soon rather than at the next
    /// flush: a listing's loaders to turn into records.
    private var hasLoadersToRetire: Bool {
        lock.lock()
        defer { lock.unlock() }
        return loaders.count >= Self.trimAfterRetiring
    }

    /// Drops the loaders no name in the tree leads to any more, keeping
    /// them weakly (`retired`); returns them, to stop and flush once the
    /// lock is let go. Linear in the tree. Call with `lock` held.
    private func retireUnreferenced() -> [FileLoader] {
        var live = Set<String>(minimumCapacity: loaders.count)
        func collect(_ directory: Directory) {
            for child in directory.children.values {
                switch child {
                case .file(let url): live.insert(url)
                case .directory(let sub): collect(sub)
                }
            }
        }
        collect(root)
        dropDeadRetired()
        for url in records.keys where !live.contains(url) { noteMembership(url) }
        records = records.filter { live.contains($0.key) }
        probing = probing.filter { live.contains($0.key) }
        var dropped: [FileLoader] = []
        for (url, loader) in loaders where !live.contains(url) {
            loaders[url] = nil
            retired[url] = WeakLoader(loader)
            dropped.append(loader)
        }
        return dropped
    }

    /// Forgets the retired loaders no one uses any more: their URLs left
    /// the mount. Call with `lock` held.
    private func dropDeadRetired() {
        let dead = retired.compactMap { $0.value.loader == nil ? $0.key : nil }
        for url in dead {
            retired[url] = nil
            noteMembership(url)
        }
    }

    /// Whether a name leads to the URL, or a retired loader of it is still
    /// in use (its bytes are freed through it). Call with `lock` held.
    private func isMounted(_ url: String) -> Bool {
        loaders[url] != nil || records[url] != nil || retired[url]?.loader != nil
    }

    /// A URL joined or left the mount: the evictor's next pass hears of it.
    /// Call with `lock` held.
    private func noteMembership(_ url: String) {
        if evictor != nil { membershipChanged.append(url) }
    }

    /// Stops what dropped loaders were fetching and saves their metadata.
    /// Call without `lock`.
    private func settle(_ dropped: [FileLoader]) {
        for loader in dropped {
            loader.stopTransfers()
            loader.flush()
        }
    }

    /// Asked (on any thread, maybe under a loader's lock: it must not wait)
    /// to have the kernel drop what it holds of a URL's files; true when
    /// it will, and then calls back, with whether every name was dropped.
    public typealias ChangeHandler = @Sendable (_ url: String, _ done: @escaping @Sendable (Bool) -> Void) -> Bool

    /// Starts the background thread
    /// that persists metadata and applies the cache limits (at once, then
    /// every `flushInterval`). `onChange` hears of files (by URL) whose
    /// remote content changed; without it no kernel holds their pages.
    public func start(onChange: ChangeHandler? = nil) {
        changeHandler.withLock { $0 = onChange }
        // The first pass before any request: until the room under the
        // limits is measured there is none, and reads would wait for it,
        // readahead and preload would fetch nothing.
        applyLimits()
        stopping.lock()
        flusherRunning = true
        stopping.unlock()
        let thread = Thread { [self] in
            store.emptyTrash()
            // The metadata read at mount left its buffers' holes.
            mediafs_malloc_trim()
            stopping.lock()
            var flushDue = Deadline.after(seconds: Self.flushInterval)
            var wake = flushDue
            var answersSinceTrim = 0
            while !stopped {
                if budget?.isPressed != true { _ = stopping.wait(until: wake) }
                if stopped { break }
                let pressed = budget?.isPressed == true
                stopping.unlock()
                // Woken early when a write found no room: make room at once,
                // and flush only when a flush is due. Woken for a backlog
                // (a listing's probed entries): loaders to records, and
                // their answers saved, a slice at a time.
                let retiredNow: Int
                let due = flushDue.hasPassed
                if due {
                    retiredNow = flushAndRetire()
                    flushDue = Deadline.after(seconds: Self.flushInterval)
                } else {
                    retiredNow = flushAndRetire(flushing: false)
                }
                answersSinceTrim += saveUnsaved(until: Deadline.after(seconds: Self.saveSlice))
                if due || pressed { applyLimits() }
                // A listing's probes free as much as they took (a request,
                // a transfer and buffers an entry), in holes malloc keeps:
                // 20 MiB of 190 at 100,000 entries; so do loaders turned
                // into records. Given back here, off the network thread,
                // and every 10,000 answers while the probes run: else the
                // peak of a cold `ls -l` of 100,000 held 6 MiB more.
                let drained = feeder.takeDrained()
                if drained || retiredNow >= Self.trimAfterRetiring || answersSinceTrim >= Self.trimDuringPass {
                    mediafs_malloc_trim()
                    answersSinceTrim = 0
                }
                wake = unsavedCount > 0 ? Deadline.after(seconds: Self.saveSlice)
                    : hasLoadersToRetire ? flushDue.earlier(Deadline.after(seconds: Self.backlogInterval)) : flushDue
                stopping.lock()
            }
            flusherRunning = false
            stopping.broadcast()
            stopping.unlock()
        }
        thread.name = "mediafs-flush"
        thread.start()
    }

    /// One eviction pass over the mount's loaders and records, measuring
    /// the room left.
    func applyLimits() {
        lock.lock()
        // Retired loaders still in use count as mounted: their bytes are
        // freed through them, never from under them.
        dropDeadRetired()
        var byURL = loaders
        for (url, weak) in retired where byURL[url] == nil {
            if let loader = weak.loader { byURL[url] = loader }
        }
        // Only what holds bytes: a copy of every record would be copied
        // whole (18 MiB at 100,000) by the first probe answer the pass met.
        var recorded: [(url: String, record: EntryRecord)] = []
        for (url, record) in records where record.allocatedBytes > 0 { recorded.append((url, record)) }
        let changed = membershipChanged.map { (url: $0, mounted: isMounted($0)) }
        membershipChanged = []
        lock.unlock()
        let membership = CacheEvictor.Membership(all: { [self] in
            lock.lock()
            defer { lock.unlock() }
            return Array(loaders.keys) + Array(records.keys) + retired.keys.filter(isMounted)
        }, changed: changed)
        // Where each URL is, found once a pass and only if a record must go.
        var paths: [String: String]?
        guard let report = evictor?.run(mounted: byURL, records: recorded, membership: membership, budget: budget,
                                        removing: { [self] url, remove in
            // Under the lock that making a loader (and loading its metadata) holds.
            lock.lock()
            defer { lock.unlock() }
            guard loaders[url] == nil, retired[url]?.loader == nil else { return false }
            remove()
            records[url]?.dropBytes()
            return true
        }, loading: { [self] url in
            lock.lock()
            defer { lock.unlock() }
            if paths == nil { paths = pathsOfFiles() }
            guard let path = paths?[url] else { return nil }
            return liveLoader(url: url, path: path)
        }) else { return }
        statistics.countEvictions(report.evictedEntries)
        noteEviction(report)
    }

    /// Each file URL's path (the first name that leads to it). Linear in
    /// the tree. Call with `lock` held.
    private func pathsOfFiles() -> [String: String] {
        var paths: [String: String] = [:]
        func collect(_ directory: Directory) {
            for name in directory.order {
                switch directory.children[name] {
                case .file(let url)?:
                    if paths[url] == nil { paths[url] = directory.path + "/" + name }
                case .directory(let sub)?:
                    collect(sub)
                case nil:
                    break
                }
            }
        }
        collect(root)
        return paths
    }

    /// Stops and joins the background threads, ends the network, and
    /// persists everything; call before exit. Safe to call twice.
    public func stop() {
        stopping.lock()
        stopped = true
        stopping.broadcast()
        while flusherRunning { stopping.wait() }
        stopping.unlock()
        feeder.stop()
        // A refresh under way finishes (its fetch is bounded by the timeout).
        listings.stop(drain: false)
        preloads.stop(drain: false)
        fetcher.shutdown()
        flushAll()
        saveUnsaved(until: .distantFuture)
        store.stop()
    }

    /// The loaders live now (files in use); the others are records.
    public var allLoaders: [FileLoader] {
        lock.lock()
        defer { lock.unlock() }
        return Array(loaders.values)
    }

    /// The mount's files, and what they hold in the cache: loaders and records.
    public func cacheUsage() -> (entries: Int, entriesWithBytes: Int, cachedBytes: Int64) {
        lock.lock()
        let live = Array(loaders.values)
        var withBytes = 0
        var cached: Int64 = 0
        for record in records.values where record.cachedBytes > 0 {
            withBytes += 1
            cached = cached.addingSaturating(record.cachedBytes)
        }
        let entries = live.count + records.count
        lock.unlock()
        for loader in live {
            let bytes = loader.status().cachedBytes
            if bytes > 0 { withBytes += 1 }
            cached = cached.addingSaturating(bytes)
        }
        return (entries, withBytes, cached)
    }

    public func flushAll() {
        lock.lock()
        let retiredInUse = retired.values.compactMap(\.loader)
        lock.unlock()
        for loader in allLoaders + retiredInUse { loader.flush() }
    }

    // MARK: The tree

    private func components(_ path: String) -> [String] {
        path.split(separator: "/").map(String.init)
    }

    /// The directory at `path`, listed if it is due. ENOENT, ENOTDIR as a
    /// file system would say.
    private func directory(at parts: some Collection<String>) throws -> Directory {
        var current = root
        for part in parts {
            try listIfDue(current)
            lock.lock()
            let child = current.children[part]
            lock.unlock()
            switch child {
            case .directory(let next)?: current = next
            case .file?: throw MediaError(ENOTDIR, "not a directory")
            case nil: throw MediaError(ENOENT, "no such file or directory")
            }
        }
        try listIfDue(current)
        return current
    }

    /// Lists a directory never listed, waiting for it; has a listed one
    /// refreshed in the background when it is due, answering from the old
    /// listing meanwhile.
    private func listIfDue(_ directory: Directory) throws {
        guard directory.url != nil else { return }
        lock.lock()
        let listed = directory.listedAt != nil
        let due = listed && !directory.refreshing && settings.clock.monotonic() >= directory.refreshAt
        if due { directory.refreshing = true }
        lock.unlock()
        if !listed {
            try fetchListing(of: directory)
        } else if due {
            let queued = listings.submit { [self] in
                try? fetchListing(of: directory)
                lock.lock()
                directory.refreshing = false
                lock.unlock()
            }
            if !queued {
                lock.lock()
                directory.refreshing = false
                lock.unlock()
            }
        }
    }

    /// Fetches a directory's index and replaces its names. On failure the
    /// old listing stays, and is tried again after `listingRetry`.
    private func fetchListing(of directory: Directory) throws {
        guard let url = directory.url else { return }
        let entries: [DirectoryListing.Entry]
        do {
            entries = DirectoryListing.parse(html: try TextFetch.get(url, options: http,
                                                                     timeout: Int(settings.timeout)), base: url)
        } catch {
            let failure = error as? MediaError ?? MediaError.io("\(error)")
            lock.lock()
            let listed = directory.listedAt != nil
            directory.refreshAt = settings.clock.monotonic() + min(dirCacheTime, Self.listingRetry)
            lock.unlock()
            Log.error("listing \(MediaError.redacted(url)): \(failure.message)"
                      + (listed ? "; serving its last listing" : ""))
            throw failure
        }
        let now = settings.clock.monotonic()
        lock.lock()
        let old = directory.children
        directory.order = []
        directory.children = [:]
        directory.naming = FileNaming()
        // The metadata of files new to the mount, read in parallel (a
        // remount's first listing of 100,000 read them one by one for 3 s)
        // but still under `lock`, as `insert` would read each.
        // Taken in listing order as the entries are inserted: a dictionary
        // of them by URL took 16 MiB at 100,000, on top of the records'.
        let isNew = entries.map { !$0.isDirectory && loaders[$0.url] == nil && records[$0.url] == nil }
        let new = zip(entries, isNew).compactMap { $1 ? $0.url : nil }
        var read = Self.loadRecords(new, from: store).makeIterator()
        // Grown once, not doubling 17 times with the old and new tables both held.
        records.reserveCapacity(records.count + new.count)
        directory.children.reserveCapacity(entries.count)
        directory.order.reserveCapacity(entries.count)
        for (entry, isNew) in zip(entries, isNew) {
            let record = isNew ? read.next() ?? nil : nil
            let safe = FileNaming.safe(entry.name)
            if entry.isDirectory, case .directory(let existing)? = old[safe], existing.url == entry.url {
                _ = directory.add(safe, .directory(existing))
            } else {
                _ = insert(Source(name: safe, url: entry.url, isDirectory: entry.isDirectory), into: directory,
                           read: record)
            }
        }
        directory.listedAt = now
        directory.refreshAt = now + dirCacheTime
        // Names that left (a file, or a directory and all below it) take
        // their loaders with them, unless another name still leads there.
        let kept = Set(directory.children.values.map(\.identity))
        let left = old.values.contains { !kept.contains($0.identity) }
        let dropped = left ? retireUnreferenced() : []
        lock.unlock()
        settle(dropped)
        // The page's text, its parse and the metadata read for it leave
        // holes between what stays (3 MiB of a remount's listing of 100,000).
        if new.count >= Self.trimAfterRetiring { mediafs_malloc_trim() }
        Log.debug("listed \(MediaError.redacted(url)): \(entries.count) entries"
                  + (dropped.isEmpty ? "" : ", \(dropped.count) files gone"))
    }

    /// `user.mediafs.refresh` on a listed directory: lists it again now, on
    /// the listings worker (after any refresh already queued), and returns
    /// once it is done. Lookups meanwhile answer from the old listing; a
    /// failure keeps it and is thrown.
    public func refresh(_ path: String) throws {
        let directory = try directory(at: components(path))
        guard directory.url != nil else {
            throw MediaError(EINVAL, "\(path.isEmpty ? "/" : path) is not a listed directory")
        }
        let done = Condition()
        nonisolated(unsafe) var outcome: Result<Void, MediaError>?
        let queued = listings.submit { [self] in
            let result: Result<Void, MediaError>
            do {
                try fetchListing(of: directory)
                result = .success(())
            } catch {
                result = .failure(error as? MediaError ?? MediaError.io("\(error)"))
            }
            done.lock()
            outcome = result
            done.broadcast()
            done.unlock()
        }
        guard queued else { throw MediaError(ESHUTDOWN, "the mount is stopping") }
        // The refresh ahead of it, then its own: each bounded by the timeout.
        let deadline = Deadline.after(seconds: 2 * settings.timeout + 1)
        done.lock()
        while outcome == nil && done.wait(until: deadline) {}
        let result = outcome
        done.unlock()
        switch result {
        case .success?: Log.info("refreshed the listing of \(path)")
        case .failure(let error)?: throw error
        case nil: throw MediaError(ETIMEDOUT, "the listing of \(path) is still being fetched")
        }
    }

    /// What a path names: the root, a directory or a file.
    public func node(at path: String) throws -> Node {
        var parts = components(path)
        guard let last = parts.popLast() else { return .directory }
        let parent = try directory(at: parts)
        lock.lock()
        let child = parent.children[last]
        lock.unlock()
        switch child {
        case .directory(let directory)?:
            try listIfDue(directory)
            return .directory
        case .file(let url)?:
            return .file(try loader(url: url, path: parent.path + "/" + last))
        case nil:
            throw MediaError(ENOENT, "no such file or directory")
        }
    }

    private func loader(url: String, path: String) throws -> FileLoader {
        lock.lock()
        defer { lock.unlock() }
        guard let loader = liveLoader(url: url, path: path) else { throw MediaError(ENOENT, "no such file") }
        return loader
    }

    /// For getattr: nil for a directory, else a file's size and mtime. A
    /// file without a loader whose record knows them answers from it: no
    /// loader is made and the disk is not read. Otherwise its loader
    /// answers, waiting on a probe if need be.
    public func attributes(at path: String) throws -> (size: Int64, mtime: Int)? {
        var parts = components(path)
        guard let last = parts.popLast() else { return nil }
        let parent = try directory(at: parts)
        let path = parent.path + "/" + last
        lock.lock()
        let child = parent.children[last]
        var known: (size: Int64, mtime: Int)?
        var loader: FileLoader?
        var probe: (RecordProbe, new: Bool)?
        if case .file(let url)? = child {
            if loaders[url] == nil, let record = records[url] {
                known = record.attributes
                if known == nil && record.listed {
                    // A listed entry's stat overtook its background probe.
                    probe = probing[url].map { ($0, false) } ?? (RecordProbe(), true)
                    if probe?.new == true { probing[url] = probe?.0 }
                }
            }
            if known == nil && probe == nil { loader = liveLoader(url: url, path: path) }
        }
        lock.unlock()
        switch child {
        case .directory(let directory)?:
            try listIfDue(directory)
            return nil
        case .file(let url)?:
            if let known { return known }
            if let (probe, new) = probe {
                if new {
                    startRecordProbe(probe, url: url, priority: .read)
                } else {
                    probe.promote()
                }
                return try awaitRecordProbe(probe, url: url, path: path)
            }
            guard let loader else { throw MediaError(ENOENT, "no such file") }
            return try loader.attributes()
        case nil:
            throw MediaError(ENOENT, "no such file or directory")
        }
    }

    // MARK: Probes of listed entries

    /// The feeder's start: probes a listed entry in the background, through
    /// its loader if it has one, else into its record, unless its size is
    /// known or a probe of it runs. Returns whether `settled` will be called.
    private func probeListed(_ url: String, then settled: @escaping @Sendable () -> Void) -> Bool {
        lock.lock()
        if let loader = loaders[url] {
            lock.unlock()
            return loader.prefetchInfo(then: settled)
        }
        guard let record = records[url], record.size == nil, probing[url] == nil else {
            lock.unlock()
            return false
        }
        let probe = RecordProbe()
        probing[url] = probe
        lock.unlock()
        startRecordProbe(probe, url: url, priority: .probe, then: settled)
        return true
    }

    /// Sends a record probe's request; call without `lock` (its completion
    /// takes it, and may run before `start` returns).
    private func startRecordProbe(_ probe: RecordProbe, url: String, priority: FetchRequest.Priority,
                                  then settled: (@Sendable () -> Void)? = nil) {
        probe.started(ContentProbe.start(url: url, fetcher: fetcher, priority: priority) { [weak self] result in
            self?.recordProbeFinished(probe, url: url, result)
            probe.finish(result)
            settled?()
        })
    }

    /// A record probe's answer goes into the record, its metadata among the
    /// unsaved; a loader made meanwhile is offered it instead. A failure is
    /// kept for the next stat to hand to a loader (`awaitRecordProbe`),
    /// whose backoff then governs the next probe.
    private func recordProbeFinished(_ probe: RecordProbe, url: String, _ result: Result<ContentInfo, MediaError>) {
        lock.lock()
        // A failure stays, so that the next stat answers it at once.
        if probing[url] === probe, case .success = result { probing[url] = nil }
        var offerTo: FileLoader?
        var wakeFlusher = false
        switch result {
        case .success(let info):
            if let loader = loaders[url] {
                offerTo = loader
            } else if var record = records[url], record.size == nil {
                let now = settings.clock.wall()
                let attributes = FileLoader.attributes(of: info)
                record.size = attributes.size
                record.mtime = attributes.mtime
                record.lastAccess = now
                record.hasMeta = true
                records[url] = record
                unsaved[url] = ProbeAnswer(info: info, validated: Int64(now))
                wakeFlusher = unsaved.count == Self.saveBatch
            }
        case .failure(let error):
            Log.warning("\(MediaError.redacted(url)): \(error.message)")
        }
        lock.unlock()
        // A failure waits in `probing` for the next stat to hand over.
        if case .success = result { offerTo?.adoptRecordProbe(result, finishedAt: probe.finishedAt) }
        // A batch waits: saving starts now, not at the next flush.
        if wakeFlusher { wakeFlushing() }
    }

    /// A stat's wait on a record probe. A failure is handed (once) to the
    /// entry's loader, which answers as a failed probe of its own would:
    /// the error, or a new probe after the backoff.
    private func awaitRecordProbe(_ probe: RecordProbe, url: String, path: String) throws -> (size: Int64, mtime: Int) {
        switch probe.wait(until: Deadline.after(seconds: settings.timeout)) {
        case .success(let info)?:
            return FileLoader.attributes(of: info)
        case .failure(let error)?:
            lock.lock()
            if probing[url] === probe { probing[url] = nil }
            let loader = liveLoader(url: url, path: path)
            let handOver = !probe.failureHandedOver
            probe.failureHandedOver = true
            lock.unlock()
            guard let loader else { throw MediaError(ENOENT, "no such file") }
            if handOver { loader.adoptRecordProbe(.failure(error), finishedAt: probe.finishedAt) }
            return try loader.attributes()
        case nil:
            throw MediaError.io("\(MediaError.redacted(url)): no answer within \(Int(settings.timeout)) s")
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
        let directory = try directory(at: components(path))
        lock.lock()
        var unknown: [String] = []
        let entries = directory.order.map { name -> Entry in
            switch directory.children[name] {
            case .directory?:
                return Entry(name: name, isDirectory: true, loader: nil, recorded: nil)
            case .file(let url)?:
                if let loader = loaders[url] {
                    if loader.markListed() { unknown.append(url) }
                    return Entry(name: name, isDirectory: false, loader: loader, recorded: nil)
                }
                if let known = records[url]?.attributes {
                    return Entry(name: name, isDirectory: false, loader: nil, recorded: known)
                }
                // Unknown attributes are probed in the background, into the record.
                if records[url] != nil {
                    records[url]?.listed = true
                    unknown.append(url)
                }
                return Entry(name: name, isDirectory: false, loader: nil, recorded: nil)
            case nil:
                return Entry(name: name, isDirectory: false, loader: nil, recorded: nil)
            }
        }
        lock.unlock()
        feeder.add(unknown)
        return entries
    }

    /// Names in the mount root, in source order.
    public var names: [String] {
        lock.lock()
        defer { lock.unlock() }
        return root.order
    }

    // MARK: Runtime sources

    /// Adds a URL to the mount root at run time; returns its name.
    public func add(url: String) throws -> String {
        let trimmed = String(url.trimmingSpaces)
        try Source.validate(url: trimmed, origin: "user.mediafs.add")
        lock.lock()
        let isDirectory = URLComponents(string: trimmed)?.path.hasSuffix("/") ?? false
        let name = insert(Source(name: FileNaming.name(forURL: trimmed), url: trimmed, isDirectory: isDirectory),
                          into: root)
        let loader = isDirectory || records[trimmed]?.attributes != nil ? nil : liveLoader(url: trimmed, path: "/" + name)
        lock.unlock()
        loader?.prefetchInfo()
        Log.info("added \(MediaError.redacted(trimmed)) as \(name)")
        return name
    }

    /// Removes a name from the mount root; its cached bytes stay cached.
    public func remove(name: String) throws {
        let trimmed = String(name.trimmingSpaces)
        lock.lock()
        guard let child = root.children.removeValue(forKey: trimmed) else {
            lock.unlock()
            throw MediaError(ENOENT, "no file named '\(trimmed)' in the mount root")
        }
        root.order.removeAll { $0 == trimmed }
        let dropped = retireUnreferenced()
        lock.unlock()
        settle(dropped)
        Log.info("removed \(trimmed)")
    }

    // MARK: Opening

    /// A file is being opened: check its validators when they are due.
    /// Returns whether the file changed, so the kernel's idea of it must be
    /// dropped before the open is answered.
    public func willOpen(_ path: String) throws -> Bool {
        let loader = try file(at: path)
        _ = try loader.contentInfo()
        guard let revalidateAfter else { return false }
        return loader.revalidate(olderThan: revalidateAfter)
    }

    /// A file was opened: preload the leading bytes of the next files in
    /// its directory, as a feed does so the next item starts at once.
    public func opened(_ path: String) {
        guard let preloadNext else { return }
        var parts = components(path)
        guard let name = parts.popLast(), let parent = try? directory(at: parts) else { return }
        lock.lock()
        var following: [FileLoader] = []
        if let index = parent.order.firstIndex(of: name) {
            for sibling in parent.order[(index + 1)...] where following.count < preloadNext.count {
                if case .file(let url)? = parent.children[sibling],
                   let loader = liveLoader(url: url, path: parent.path + "/" + sibling) {
                    following.append(loader)
                }
            }
        }
        lock.unlock()
        let next = following
        guard !next.isEmpty else { return }
        preloads.submit {
            for loader in next {
                do {
                    try loader.preload(limit: preloadNext.bytes)
                } catch {
                    Log.warning("preload of \(loader.source.displayURL): \(error)")
                }
            }
        }
    }

    // MARK: The whole mount

    /// Keeps the last pass's report, and says once when pinned bytes alone
    /// come to exceed the size limit, and once when they fit again.
    private func noteEviction(_ report: CacheEvictor.Report) {
        lock.lock()
        let was = lastEviction.pinnedOverLimit
        lastEviction = report
        lock.unlock()
        guard was != report.pinnedOverLimit, let limit = evictor?.limits.maxSize else { return }
        if report.pinnedOverLimit {
            Log.warning("pinned files take \(report.pinnedBytes) bytes, more than the cache limit of \(limit): "
                        + "every unpinned byte is evicted and new bytes pass uncached; unpin some files")
        } else {
            Log.info("pinned files fit under the cache limit again (\(report.pinnedBytes) of \(limit) bytes)")
        }
    }

    /// Drops every cached byte of the mount's files (a record with bytes
    /// gets its loader to do it); returns the URLs whose pages the kernel
    /// must drop.
    public func purgeAll() -> [String] {
        lock.lock()
        var targets = Array(loaders.values)
        func collect(_ directory: Directory) {
            for (name, child) in directory.children {
                switch child {
                case .file(let url):
                    if let record = records[url], record.cachedBytes > 0,
                       let loader = liveLoader(url: url, path: directory.path + "/" + name) {
                        targets.append(loader)
                    }
                case .directory(let sub):
                    collect(sub)
                }
            }
        }
        collect(root)
        lock.unlock()
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
        lock.lock()
        let eviction = lastEviction
        lock.unlock()
        let stats = Stats(entries: Int64(usage.entries), cachedBytes: usage.cachedBytes,
                          cacheMaxSize: evictor?.limits.maxSize ?? 0, pinnedBytes: eviction.pinnedBytes,
                          pinnedOverLimit: eviction.pinnedOverLimit, bytesFromCache: counters.bytesFromCache,
                          bytesFromNetwork: counters.bytesFromNetwork, requests: counters.requests,
                          transfersInFlight: counters.transfersInFlight, kernelReadOpens: counters.kernelReadOpens,
                          attributeRequests: counters.attributeRequests)
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = .sortedKeys
        // Numbers and a Bool: encoding cannot fail.
        return (try? encoder.encode(stats)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    /// What `stats` says, its keys in snake case.
    private struct Stats: Encodable {
        var entries, cachedBytes, cacheMaxSize, pinnedBytes: Int64
        var pinnedOverLimit: Bool
        var bytesFromCache, bytesFromNetwork, requests, transfersInFlight, kernelReadOpens, attributeRequests: Int64
    }
}
