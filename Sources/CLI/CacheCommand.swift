// `mediafs cache ls|gc|clear`: the cache on disk, without a mount. gc and
// clear take the cache's lock, so they refuse a cache a mount is using; ls
// only reads, and lists a cache in use as it is at that moment.
import Foundation
import MediaCache
import MediaStore
import MediaSupport
import MediaFS

struct CacheCommand {
    static let usage = "usage: mediafs cache ls|gc|clear [--cache-dir DIR] [LIMITS] [URL...]"

    var action = ""
    var cache = CacheOptions()
    var urls: [String] = []

    init(arguments: [String]) throws {
        var rest = arguments[...]
        guard let action = rest.popFirst(), ["ls", "gc", "clear"].contains(action) else {
            throw UsageError(Self.usage)
        }
        self.action = action
        while let argument = rest.popFirst() {
            let (option, inline) = UsageError.split(argument)
            let taken = try cache.take(option) {
                guard let value = inline ?? rest.popFirst() else { throw UsageError("\(option) needs a value") }
                return value
            }
            if taken { continue }
            if argument.hasPrefix("-") { throw UsageError("unknown option '\(argument)'\n\(Self.usage)") }
            urls.append(argument)
        }
        if !urls.isEmpty && action != "clear" { throw UsageError("only 'cache clear' takes URLs\n\(Self.usage)") }
    }

    func run() throws {
        let store = try CacheStore(root: cache.resolvedDirectory)
        // The command's one clock: its waits, and what "old" means for the limits.
        let clock = Clock.system
        if action == "ls" { return list(store, clock: clock) }
        let lock = try CacheLock(directory: store.root, wait: CacheLock.departureWait, clock: clock,
                                 isMounted: MediaFS.isMounted(resolved:))
        try withExtendedLifetime(lock) {
            // Removal deletes on the trash worker; the space must be free
            // when the command returns, leftovers of a crashed mount included.
            defer { store.stop(); store.emptyTrash() }
            let now = clock.wall()
            if action == "gc" {
                store.openAnswers(maxAge: cache.limits.maxAgePartial, now: now)
                let report = CacheEvictor(store: store, limits: cache.limits).run(now: Int64(now))
                print("removed \(report.evictedEntries) entries, freed \(StatusCommand.human(report.freedBytes)); "
                      + "\(StatusCommand.human(report.usedBytes)) in use")
                if report.pinnedOverLimit {
                    print("pinned entries take \(StatusCommand.human(report.pinnedBytes)), more than the limit of "
                          + "\(StatusCommand.human(cache.limits.maxSize)); they are kept (unpin them on a mount)")
                }
            } else {
                try clear(store, now: now)
            }
        }
    }

    private func list(_ store: CacheStore, clock: Clock) {
        do {
            _ = try CacheLock(directory: store.root, wait: 0, clock: clock)
        } catch let error as MediaError where error.errno == EBUSY {
            Log.info("\(error.message); listing it as it is now")
        } catch {
            Log.warning("\(error)")
        }
        var entries = store.entries()
        // Probe answers of entries with no directory: they hold no bytes.
        let stored = Set(entries.compactMap { $0.meta?.url })
        entries += store.answerEntries().filter { !stored.contains($0.meta?.url ?? "") }
        entries.sort { ($0.meta?.lastAccess ?? 0) > ($1.meta?.lastAccess ?? 0) }
        print("SIZE        CACHED  COMPLETE  PINNED  LAST ACCESS           URL")
        for entry in entries {
            guard let meta = entry.meta else {
                print("?           ?       ?         ?       ?                     (damaged entry \(entry.directory))")
                continue
            }
            let share = meta.info.length > 0 ? Double(meta.present.byteCount) * 100 / Double(meta.info.length) : 100
            let accessed = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: Double(meta.lastAccess)))
            let columns = [StatusCommand.human(meta.info.length).padding(toLength: 11, withPad: " ", startingAt: 0),
                           (String(format: "%.1f", share) + "%").padding(toLength: 7, withPad: " ", startingAt: 0),
                           (meta.isComplete ? "yes" : "no").padding(toLength: 9, withPad: " ", startingAt: 0),
                           (meta.pinned ? "yes" : "no").padding(toLength: 7, withPad: " ", startingAt: 0),
                           accessed.padding(toLength: 21, withPad: " ", startingAt: 0),
                           MediaError.redacted(meta.url)]
            print(columns.joined(separator: " "))
        }
        let used = entries.reduce(Int64(0)) { $0.addingSaturating($1.allocatedBytes) }
        print("\(entries.count) entries, \(StatusCommand.human(used)) on disk in \(store.root)")
    }

    private func clear(_ store: CacheStore, now: Double) throws {
        store.openAnswers(now: now)
        if urls.isEmpty {
            for entry in store.entries() { store.remove(directory: entry.directory) }
            store.answers.clear()
            print("cleared \(store.root)")
            return
        }
        let answered = Set(store.answers.forget(urls))
        for url in urls {
            let stored = FileManager.default.fileExists(atPath: store.directory(forKey: url))
            guard stored || answered.contains(url) else {
                throw MediaError(ENOENT, "no cache entry for \(MediaError.redacted(url))")
            }
            if stored { store.remove(key: url) }
            print("removed \(MediaError.redacted(url))")
        }
    }
}
