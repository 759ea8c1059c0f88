// Keeps the cache within its limits: total size, free space left on its
// file system, and age (partial and complete entries have separate ages, as
// unfinished and finished downloads do in the mobile caches this grew from).
// Least recently used goes first, and entries only library scans have read
// (scan-only, ReadClass) before any other: they have a budget of their own,
// which a pass keeps them under by trimming scan-only entries to their
// probe ranges (head and tail, what the next scan reads), then evicting
// scan-only entries alone, and a
// player's entry goes only when players' bytes alone are past the limits
// (a scan's bytes take only room free under both). The class is an entry's,
// not a byte's: an entry a player read is a player's, all of it. Entries of the running mount are evicted
// through their loader, which refuses while a transfer runs or a read waits;
// a mounted file known by its record gets a loader for it (moving its entry
// away would forget the validators that tell a change, and the kernel would
// go on serving the old version's pages); entries of no mounted file are
// renamed into trash/, while no loader stands for them, and deleted in the
// background. Pinned
// entries are never evicted or trimmed, but count against the size limit:
// when they alone fill it, the rest goes and new bytes pass uncached.
//
// The disk is scanned once, at the first pass: the cache lock makes this
// process the cache's only user, so afterwards the entries of the mount are
// known through their loaders and records, and the others
// (`Index.unmounted`) change only when a pass evicts them or a file joins
// or leaves the mount, which the caller reports (`Membership`). A pass thus
// reads no metadata file but those it could not read before, keeps no copy
// of the mount's URLs, and costs O(entries with bytes) plus a sort when
// something must go.
//
// Only metadata that reads and fails its checks makes an entry garbage; one
// that cannot be read now (out of descriptors, an I/O error) is kept and
// read again at the next pass, since the bytes it claims are likely sound.
import Foundation
#if canImport(Glibc)
import Glibc
import MediaStore
import MediaSupport
#endif

public struct CacheLimits: Sendable, Equatable {
    public var maxSize: Int64 = 10 << 30
    public var minFree: Int64 = 1 << 30
    /// Partial entries not read for this long are dropped.
    public var maxAgePartial: Double = 7 * 86_400
    /// Complete entries not read for this long are dropped.
    public var maxAgeComplete: Double = 30 * 86_400
    /// Bytes of entries only library scans have read (`--scan-cache-size`);
    /// nil: an eighth of `maxSize`.
    public var scanMaxSize: Int64?

    public init() {}

    /// The scan budget: never more than the whole cache.
    public var scanLimit: Int64 { min(scanMaxSize ?? maxSize / 8, maxSize) }
}

public struct CacheEvictor: Sendable {
    public struct Report: Sendable, Equatable {
        public var evictedEntries = 0
        public var freedBytes: Int64 = 0
        public var usedBytes: Int64 = 0
        /// Disk blocks held by pinned entries, counted in `usedBytes`.
        public var pinnedBytes: Int64 = 0
        /// Pinned entries alone take more than the size limit: everything
        /// else is gone, and new bytes pass uncached.
        public var pinnedOverLimit = false
        /// The disk leaves no useful room under `--cache-min-free` even with
        /// every unpinned byte gone (`minUsefulRoom`): new bytes pass
        /// uncached, with no eviction pass per read (decision 0046).
        public var noDiskRoom = false
        /// Bytes free on the cache's disk after the pass (nil: unknown).
        public var freeBytes: Int64?
        /// Whether new bytes pass uncached: nothing may be written.
        public var passesThrough: Bool { pinnedOverLimit || noDiskRoom }
    }

    private struct Item {
        enum Place {
            /// A file of the mount in use: freed through its loader.
            case loader(any EvictableFile)
            /// A file of the mount known by its record (by URL).
            case record(String)
            /// An entry of no mounted file: its directory, and the URL its
            /// metadata names.
            case unmounted(directory: String, url: String?)
            /// An entry of no mounted file whose metadata could not be read
            /// at the last look, and its URL when known (a file that left
            /// the mount). Never evicted before it reads (it may be pinned),
            /// but its bytes are counted: they take the disk all the same,
            /// and left out, the cache would outgrow its limits unseen.
            case unknown(url: String?, error: MediaError)
        }

        var place: Place
        var allocated: Int64
        var lastAccess: Double
        var complete: Bool
        var pinned: Bool
        /// Only library scans have read it: evicted first.
        var scanOnly = false
        /// A handle is open on it (a loader's entry only).
        var open = false

        var loader: (any EvictableFile)? {
            if case .loader(let loader) = place { return loader }
            return nil
        }

        /// Why its metadata could not be read, for an `unknown` entry.
        var unreadable: MediaError? {
            if case .unknown(_, let error) = place { return error }
            return nil
        }

        /// Never evicted, so its age and its place in the LRU order do not matter.
        static func unknown(url: String?, error: MediaError, allocated: Int64) -> Item {
            Item(place: .unknown(url: url, error: error), allocated: allocated, lastAccess: 0, complete: false,
                 pinned: false)
        }
    }

    /// What the passes know of the cache between them. `lock` serialises
    /// passes (it is held for a whole pass, and taken before any loader's).
    private final class Index: @unchecked Sendable {
        let lock = NSLock()
        var scanned = false
        /// Entries of no mounted file, by directory.
        var unmounted: [String: Item] = [:]
        /// The removal guard of the pass under way (see `run`).
        var remover: ((_ url: String, _ remove: () -> Void) -> Bool)?
        /// Makes the loader of a record of the pass under way (see `run`).
        var loading: ((_ url: String) -> (any EvictableFile)?)?
    }

    public let store: CacheStore
    public let limits: CacheLimits
    private let index = Index()

    /// What the caller tells a pass of the mount's files besides their
    /// loaders and the records that hold bytes.
    public struct Membership {
        /// Every URL of the mount: read by the first pass only, whose scan
        /// of the disk skips their entries (they are followed through their
        /// loaders and records).
        public var all: () -> [String]
        /// URLs that joined or left the mount since the last pass, each with
        /// whether it is in the mount now. The entry of one that left is read
        /// back from disk; that of one that joined leaves the index.
        public var changed: [(url: String, mounted: Bool)]

        public init(all: @escaping () -> [String] = { [] }, changed: [(url: String, mounted: Bool)] = []) {
            self.all = all
            self.changed = changed
        }
    }

    public init(store: CacheStore, limits: CacheLimits) {
        self.store = store
        self.limits = limits
    }

    /// Room a pass makes below the limits once the room ran low (under
    /// half of this), so writes go on while it works: an eighth of the size
    /// limit, at most 64 MiB.
    public var headroom: Int64 { min(limits.maxSize / 8, 64 << 20) }

    /// Less room than this on the disk, with every unpinned byte gone, is
    /// no room: caching there would write each read's bytes and evict them
    /// at the next read (a few transfers' worth; less for a small cache).
    public var minUsefulRoom: Int64 { min(headroom, 16 << 20) }

    /// The same for the scan budget: a quarter of it, at most 16 MiB.
    public var scanHeadroom: Int64 { min(limits.scanLimit / 4, 16 << 20) }

    /// Applies the limits once. `mounted` are the loaders of the running
    /// mount, by URL; their bytes are freed only through them. `records`
    /// are its other files that hold bytes (a URL that has a loader too
    /// counts as a loader); `membership` says which files are in the mount
    /// (the loaders' and records' URLs count as in it). With a
    /// `budget`, the room left under the limits is measured for it, and
    /// when it ran out (writes were refused) `headroom` more is made.
    ///
    /// `removing`, when given, removes an entry without a loader: it runs
    /// the removal only while no loader stands for that URL (and then
    /// updates its record, if any), and says whether it did. A loader made
    /// between the pass's snapshot and the removal would otherwise claim
    /// bytes from a directory in the trash (and read zeros from the fresh
    /// data file that replaces it).
    ///
    /// `loading` makes the loader of a record's URL, through which its
    /// entry is evicted; without it, records are never evicted.
    @discardableResult
    public func run(mounted: [String: any EvictableFile] = [:], records: [(url: String, usage: FileUsage)] = [],
                    membership: Membership = Membership(), budget: CacheBudget? = nil, now: Int64,
                    removing: ((_ url: String, _ remove: () -> Void) -> Bool)? = nil,
                    loading: ((_ url: String) -> (any EvictableFile)?)? = nil) -> Report {
        let mark = budget?.mark ?? 0
        let scanMark = budget?.scanMark ?? 0
        let extra = budget?.isPressed == true ? headroom : 0
        var report = Report()
        index.lock.lock()
        defer { index.lock.unlock() }
        index.remover = removing
        index.loading = loading
        defer {
            index.remover = nil
            index.loading = nil
        }
        if index.scanned {
            lookAgain(report: &report)
            follow(membership.changed, mounted)
        } else {
            // The changes reported are older than the list `all` gives now.
            scan(Set(mounted.keys).union(records.map(\.url)).union(membership.all()), report: &report)
        }
        var items = Array(index.unmounted.values)
        let unreadable = items.compactMap(\.unreadable)
        if let error = unreadable.first {
            // One line a pass, however many: they most likely share a cause.
            Log.warning("cache limits: unreadable metadata kept for now (entries: \(unreadable.count); "
                        + "\(error.message)): counted, not evicted, read again at the next pass")
        }
        items.reserveCapacity(items.count + mounted.count)
        for loader in mounted.values {
            // An entry with no bytes yet (most of a big listing) costs nothing to keep.
            let usage = loader.usage()
            guard usage.allocatedBytes > 0 else { continue }
            items.append(Item(place: .loader(loader), allocated: usage.allocatedBytes, lastAccess: usage.lastAccess,
                              complete: usage.isComplete, pinned: usage.isPinned,
                              scanOnly: usage.isScanOnly && !usage.isPinned, open: usage.isOpen))
        }
        for (url, record) in records where record.allocatedBytes > 0 && mounted[url] == nil {
            items.append(Item(place: .record(url), allocated: record.allocatedBytes, lastAccess: record.lastAccess,
                              complete: record.isComplete, pinned: record.isPinned,
                              scanOnly: record.isScanOnly && !record.isPinned))
        }

        var kept: [Item] = []
        for item in items {
            let maxAge = item.complete ? limits.maxAgeComplete : limits.maxAgePartial
            if Double(now) - item.lastAccess > maxAge, evict(item) {
                report.evictedEntries += 1
                report.freedBytes += item.allocated
            } else {
                kept.append(item)
            }
        }

        // The scan budget first, from scan-only entries alone: a scan that
        // found no room (`isScanPressed`) gets a headroom of its own.
        var scanUsed = kept.reduce(Int64(0)) { $0 + ($1.scanOnly ? $1.allocated : 0) }
        let scanExtra = budget?.isScanPressed == true ? scanHeadroom : 0
        var scanNeed = scanUsed.addingSaturating(scanExtra) - limits.scanLimit
        if scanExtra > 0 {
            // A scan found no room while its budget was not full: the whole
            // cache is, with players' bytes and older scans'. Its headroom
            // comes from older scans' entries alone, or no scan would be
            // cached again until a player's bytes went.
            let usedAll = kept.reduce(Int64(0)) { $0.addingSaturating($1.allocated) }
            let free = store.freeBytes() ?? Int64.max
            scanNeed = max(scanNeed, usedAll.addingSaturating(scanExtra) - limits.maxSize,
                           limits.minFree.addingSaturating(scanExtra) - free)
        }
        if scanNeed > 0 {
            // What lies between a file's probe ranges goes first, from every
            // scan-only file, least recently used first: the next scan of
            // an unchanged library then sends no request.
            for position in kept.indices.sorted(by: { kept[$0].lastAccess < kept[$1].lastAccess })
            where scanNeed > 0 && kept[position].scanOnly && kept[position].allocated > 0 {
                guard let loader = loader(of: kept[position]) else { continue }
                let before = loader.usage().allocatedBytes
                loader.trimToProbeRanges()
                let freed = max(before - loader.usage().allocatedBytes, 0)
                kept[position].allocated -= freed
                scanNeed -= freed
                scanUsed -= freed
                report.freedBytes += freed
            }
        }
        if scanNeed > 0 {
            var left: [Item] = []
            // Within the scan budget the most recently used file goes
            // first, one no handle has open: a scan walks a library in
            // the same order each time, and evicting its least recently
            // scanned file would take the very file a rescan asks for next
            // (decision 0013); a file a probe has open goes last (it may
            // read it again at once).
            for item in kept.sorted(by: Self.scanEvictionOrder) {
                if scanNeed > 0, item.scanOnly, item.allocated > 0, evict(item) {
                    scanNeed -= item.allocated
                    scanUsed -= item.allocated
                    report.evictedEntries += 1
                    report.freedBytes += item.allocated
                } else {
                    left.append(item)
                }
            }
            kept = left
        }

        var used = kept.reduce(Int64(0)) { $0 + $1.allocated }
        let free = store.freeBytes() ?? Int64.max
        var need = max(used.addingSaturating(extra) - limits.maxSize,
                       limits.minFree.addingSaturating(extra) - free, 0)
        var survivors: [Item] = []
        // Sorted only when something must go: most passes evict nothing.
        // Scan-only entries go first, then the least recently used.
        let order: (Item, Item) -> Bool = { ($0.scanOnly ? 0 : 1, $0.lastAccess) < ($1.scanOnly ? 0 : 1, $1.lastAccess) }
        for item in need > 0 ? kept.sorted(by: order) : kept {
            if need > 0, item.allocated > 0, evict(item) {
                need -= item.allocated
                used -= item.allocated
                if item.scanOnly { scanUsed -= item.allocated }
                report.evictedEntries += 1
                report.freedBytes += item.allocated
            } else {
                survivors.append(item)
            }
        }
        // What is left is in use: a file larger than the cache plays on with
        // its played bytes dropped. Least recently used first, as above: a
        // busy older file gives its bytes before the newest does.
        for item in survivors where need > 0 && !item.pinned {
            guard let loader = item.loader else { continue }
            let before = loader.usage().allocatedBytes
            loader.trim(to: max(loader.usage().cachedBytes - need, 0))
            let freed = before - loader.usage().allocatedBytes
            need -= freed
            used -= freed
            report.freedBytes += freed
        }
        report.usedBytes = used
        report.pinnedBytes = survivors.reduce(Int64(0)) { $0.addingSaturating($1.pinned ? $1.allocated : 0) }
        report.pinnedOverLimit = report.pinnedBytes > limits.maxSize
        let freed = report.freedBytes
        let freeAfter = free.addingSaturating(freed)
        report.freeBytes = free == Int64.max ? nil : freeAfter
        // What the disk would leave if every unpinned byte went: below a
        // useful room, writing a read's bytes only evicts the last read's.
        let unpinned = max(used - report.pinnedBytes, 0)
        report.noDiskRoom = freeAfter.addingSaturating(unpinned) - limits.minFree < minUsefulRoom
        if let budget {
            let room = report.passesThrough ? 0 : min(limits.maxSize - used, freeAfter - limits.minFree)
            let scanRoom = min(room, limits.scanLimit - scanUsed)
            budget.measured(room: max(room, 0), since: mark, lowWater: headroom / 2,
                            scan: (room: max(scanRoom, 0), since: scanMark, lowWater: scanHeadroom / 2),
                            passesThrough: report.passesThrough)
            Log.debug("cache limits: \(used) bytes used, \(max(room, 0)) bytes of room, \(freed) bytes freed")
        }
        return report
    }

    /// The order the scan budget evicts in: scan-only entries before any
    /// other, closed before open, the most recently used first.
    private static func scanEvictionOrder(_ a: Item, _ b: Item) -> Bool {
        if a.scanOnly != b.scanOnly { return a.scanOnly }
        if a.open != b.open { return !a.open }
        return a.lastAccess > b.lastAccess
    }

    /// The first pass: every entry on disk that no file of the mount
    /// (`urls`) stands for is taken into the index (`take`).
    /// Call with `index.lock` held.
    private func scan(_ urls: Set<String>, report: inout Report) {
        let mountedDirectories = Set(urls.map { store.directory(forKey: $0) })
        for entry in store.entries(excluding: mountedDirectories) { take(entry, report: &report) }
        index.scanned = true
    }

    /// Indexes an entry found on disk, or removes it when its metadata is
    /// missing or damaged (a crash's leftovers: nothing in it is trusted).
    /// One whose metadata cannot be read now is indexed as unknown.
    /// Call with `index.lock` held.
    private func take(_ entry: CacheStore.StoredEntry, report: inout Report) {
        if let meta = entry.meta {
            index.unmounted[entry.directory] = Item(place: .unmounted(directory: entry.directory, url: meta.url),
                                                    allocated: entry.allocatedBytes,
                                                    lastAccess: Double(meta.lastAccess), complete: meta.isComplete,
                                                    pinned: meta.pinned, scanOnly: meta.scanOnly && !meta.pinned)
        } else if let error = entry.unreadable {
            index.unmounted[entry.directory] = .unknown(url: nil, error: error, allocated: entry.allocatedBytes)
        } else {
            store.remove(directory: entry.directory)
            index.unmounted[entry.directory] = nil
            report.evictedEntries += 1
            report.freedBytes += entry.allocatedBytes
        }
    }

    /// Later passes, first: the entries whose metadata could not be read
    /// are read again, as the scan or `follow` read them. One the mount
    /// took since has left the index already. Call with `index.lock` held.
    private func lookAgain(report: inout Report) {
        let unknown = index.unmounted.compactMap { directory, item -> (directory: String, url: String?)? in
            guard case .unknown(let url, _) = item.place else { return nil }
            return (directory, url)
        }
        for (directory, url) in unknown {
            if let url {
                readBack(url)
            } else {
                take(store.entry(inDirectory: directory), report: &report)
            }
        }
    }

    /// Later passes: a file that joined the mount takes its entry out of
    /// the index (it is followed through its loader or record now); the
    /// entry of a file that left is read back from disk. A loader's entry
    /// leaves the index whatever was reported: its bytes go only through
    /// it. Call with `index.lock` held.
    private func follow(_ changed: [(url: String, mounted: Bool)], _ mounted: [String: any EvictableFile]) {
        for (url, isMounted) in changed where mounted[url] == nil {
            if isMounted {
                index.unmounted[store.directory(forKey: url)] = nil
            } else {
                readBack(url)
            }
        }
        for url in mounted.keys { index.unmounted[store.directory(forKey: url)] = nil }
        // A dictionary keeps its buckets when emptied, and a remount's first
        // pass indexes every entry its listing then takes back (decision 0010).
        if index.unmounted.count < index.unmounted.capacity / 4 {
            index.unmounted = Dictionary(uniqueKeysWithValues: index.unmounted.map { $0 })
        }
    }

    /// Indexes the entry of a file that left the mount, read back from
    /// disk: with no metadata worth trusting it leaves the index, and with
    /// metadata that cannot be read now it is indexed as unknown.
    /// Call with `index.lock` held.
    private func readBack(_ url: String) {
        let directory = store.directory(forKey: url)
        switch store.readMeta(forKey: url) {
        case .found(let meta):
            index.unmounted[directory] = Item(place: .unmounted(directory: directory, url: url),
                                              allocated: Self.allocatedBytes(in: directory),
                                              lastAccess: Double(meta.lastAccess), complete: meta.isComplete,
                                              pinned: meta.pinned)
        case .missing:
            index.unmounted[directory] = nil
        case .unreadable(let error):
            index.unmounted[directory] = .unknown(url: url, error: error,
                                                  allocated: Self.allocatedBytes(in: directory))
        }
    }

    private static func allocatedBytes(in directory: String) -> Int64 {
        var total: Int64 = 0
        for file in ["data", "meta"] {
            var st = stat()
            if lstat("\(directory)/\(file)", &st) == 0 { total += Int64(st.st_blocks) * 512 }
        }
        return total
    }

    /// The loader an entry of the mount is freed through: its own, or one
    /// made for its record. Call with `index.lock` held.
    private func loader(of item: Item) -> (any EvictableFile)? {
        switch item.place {
        case .loader(let loader): return loader
        case .record(let url): return index.loading?(url)
        case .unmounted, .unknown: return nil
        }
    }

    /// Call with `index.lock` held.
    private func evict(_ item: Item) -> Bool {
        if item.pinned { return false }
        switch item.place {
        case .unknown:
            return false
        case .loader(let loader):
            return loader.evict()
        case .record(let url):
            return index.loading?(url)?.evict() ?? false
        case .unmounted(let directory, let url):
            if let remover = index.remover, let url {
                guard remover(url, { store.remove(directory: directory) }) else {
                    // In use again: the next pass finds its loader.
                    index.unmounted[directory] = nil
                    return false
                }
            } else {
                store.remove(directory: directory)
            }
            index.unmounted[directory] = nil
            return true
        }
    }
}

