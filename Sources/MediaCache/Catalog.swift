// What the mount shows: the names in its root and the loader behind each.
// The FUSE adapter talks only to this type. It also owns the background
// flusher that persists loaders' metadata while the mount runs.
import Foundation
#if canImport(Glibc)
import Glibc
#endif

public final class Catalog: @unchecked Sendable {
    /// How often changed metadata is written while mounted.
    public static let flushInterval: Double = 2

    public let names: [String]
    private let loaders: [String: FileLoader]
    private let stopping = NSCondition()
    private var stopped = false
    private var flusher: Thread?

    public init(sources: [Source], store: CacheStore, fetcher: Fetching, settings: LoaderSettings) {
        names = sources.map(\.name)
        var loaders: [String: FileLoader] = [:]
        for source in sources {
            loaders[source.name] = FileLoader(source: source, store: store, fetcher: fetcher, settings: settings)
        }
        self.loaders = loaders
    }

    /// Learns every unknown length in parallel so the first `ls -l` does not
    /// wait on one request after another, and starts the flusher.
    public func start() {
        for name in names { loaders[name]!.prefetchInfo() }
        let thread = Thread { [self] in
            stopping.lock()
            while !stopped {
                stopping.unlock()
                flushAll()
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

    /// The loader for a name in the mount root; ENOENT for unknown names.
    public func loader(named name: String) throws -> FileLoader {
        guard let loader = loaders[name] else { throw MediaError(ENOENT, "no file named \(name)") }
        return loader
    }
}
