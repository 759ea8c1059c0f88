// What the mount shows: the names in its root and the loader behind each.
// The FUSE adapter talks only to this type. It also owns the background
// flusher that persists loaders' metadata while the mount runs.
import Foundation
#if canImport(Glibc)
import Glibc
#endif

public final class Catalog: @unchecked Sendable {
    /// How often changed metadata is written while mounted.
    public static let flushInterval: Double = 5

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

    public let names: [String]
    public let statistics = Statistics()
    public let store: CacheStore
    private let preloadNext: PreloadNext?
    private let evictor: CacheEvictor?
    /// Validators older than this are checked on open; nil: never.
    private let revalidateAfter: Double?
    private let loaders: [String: FileLoader]
    private let stopping = NSCondition()
    private var stopped = false
    private var flusher: Thread?

    public init(sources: [Source], store: CacheStore, fetcher: Fetching, settings: LoaderSettings,
                preloadNext: PreloadNext? = nil, limits: CacheLimits? = nil, revalidateAfter: Double? = 60) {
        names = sources.map(\.name)
        self.store = store
        self.preloadNext = preloadNext
        self.revalidateAfter = revalidateAfter
        evictor = limits.map { CacheEvictor(store: store, limits: $0) }
        var loaders: [String: FileLoader] = [:]
        for source in sources {
            loaders[source.name] = FileLoader(source: source, store: store, fetcher: fetcher, settings: settings,
                                              statistics: statistics)
        }
        self.loaders = loaders
    }

    /// Learns every unknown length in parallel so the first `ls -l` does not
    /// wait on one request after another, and starts the background thread
    /// that persists metadata and applies the cache limits (at once, then
    /// every `flushInterval`). `onChange` hears of files whose remote
    /// content changed.
    public func start(onChange: @escaping @Sendable (String) -> Void = { _ in }) {
        for name in names {
            loaders[name]!.onChange = { onChange(name) }
            loaders[name]!.prefetchInfo()
        }
        let byURL = Dictionary(loaders.values.map { ($0.source.url, $0) }, uniquingKeysWith: { a, _ in a })
        let thread = Thread { [self] in
            stopping.lock()
            while !stopped {
                stopping.unlock()
                flushAll()
                evictor?.run(mounted: byURL)
                stopping.lock()
                _ = stopping.wait(until: Date(timeIntervalSinceNow: Self.flushInterval))
            }
            stopping.unlock()
        }
        thread.name = "mediafs-flush"
        flusher = thread
        thread.start()
    }

    /// Stops the flusher and persists everything; call before exit.
    public func stop() {
        stopping.lock()
        stopped = true
        stopping.broadcast()
        stopping.unlock()
        flushAll()
    }

    public func flushAll() {
        for name in names { loaders[name]!.flush() }
    }

    /// A file is being opened: check its validators when they are due.
    public func willOpen(_ name: String) throws {
        let loader = try loader(named: name)
        _ = try loader.contentInfo()
        if let revalidateAfter { loader.revalidate(olderThan: revalidateAfter) }
    }

    /// A file was opened: preload the leading bytes of the next ones, as a
    /// feed does so the next item starts at once.
    public func opened(_ name: String) {
        guard let preloadNext, let index = names.firstIndex(of: name) else { return }
        let next = names[(index + 1)...].prefix(preloadNext.count).map { loaders[$0]! }
        guard !next.isEmpty else { return }
        Thread.detachNewThread {
            for loader in next {
                do {
                    try loader.preload(limit: preloadNext.bytes)
                } catch {
                    Log.warning("preload of \(loader.source.displayURL): \(error)")
                }
            }
        }
    }

    public func purgeAll() {
        for name in names { loaders[name]!.purge() }
    }

    /// For statfs: the cache's room and what this mount's files hold of it.
    public func usage() -> (capacity: Int64, used: Int64, available: Int64) {
        var fs = statvfs()
        let cached = names.reduce(Int64(0)) { $0 + loaders[$1]!.status().cachedBytes }
        guard statvfs(store.root, &fs) == 0 else { return (cached, cached, 0) }
        let available = Int64(fs.f_bavail) * Int64(fs.f_frsize)
        return (cached + available, cached, available)
    }

    /// The root's `stats`: one JSON object.
    public func statsJSON() -> String {
        let counters = statistics.snapshot
        let cached = names.reduce(Int64(0)) { $0 + loaders[$1]!.status().cachedBytes }
        return "{\"entries\":\(names.count),\"cached_bytes\":\(cached),"
            + "\"bytes_from_cache\":\(counters.bytesFromCache),\"bytes_from_network\":\(counters.bytesFromNetwork),"
            + "\"requests\":\(counters.requests),\"transfers_in_flight\":\(counters.transfersInFlight)}"
    }

    /// The loader for a name in the mount root; ENOENT for unknown names.
    public func loader(named name: String) throws -> FileLoader {
        guard let loader = loaders[name] else { throw MediaError(ENOENT, "no file named \(name)") }
        return loader
    }
}
