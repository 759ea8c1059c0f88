// What the catalog's lock guards, as one value: the tree of names, the
// loaders and records of the URLs they lead to, the probe answers waiting to
// be saved, the record probes under way, the retired loaders and the URLs
// whose membership changed. The catalog holds it in a `Locked`, so none of it
// is touched without the lock. Its fields are read from outside but written
// only by its methods: each transition that keeps invariant 12 (a URL has a
// loader or a record, never both; docs/architecture.md) is one method here.
//
// A Directory is a class (a lookup and the listings worker hold one across
// the lock's release, to list it), but its names, children and listing
// times are private to this file: only the state's methods read or change
// them, and those run under the lock.
//
// Making or checking a loader takes the loader's own lock under this one
// (catalog → loader); nothing here waits on the network or the disk, but
// for the metadata a new loader or record reads, which must be read under
// this lock (see `liveLoader`).
import Foundation
import MediaSources
import MediaStore
import MediaSupport

struct CatalogState: Sendable {
    /// A directory of the mount: its names in order, and for a listed one,
    /// its Listing, when it was listed and when it is listed again.
    final class Directory: @unchecked Sendable {
        /// What lists it; nil: a mount root whose names the arguments gave.
        let listing: (any Listing)?
        /// Its URL, for telling whether a new listing kept it.
        let url: String?
        /// Its path in the mount, "" for the root.
        let path: String
        fileprivate var order: [String] = []
        fileprivate var children: [String: Child] = [:]
        fileprivate var naming = FileNaming()
        /// When the listing in use was fetched; nil: never (a lookup waits).
        fileprivate var listedAt: Double?
        /// When a lookup should have it fetched again, in the background.
        fileprivate var refreshAt = 0.0
        /// A background refresh is queued or running.
        fileprivate var refreshing = false
        /// Since when a listing that dropped most of its names is doubted
        /// (ListingDoubt); nil: none is.
        fileprivate var doubtedSince: Double?
        /// A listed root's names added at run time (`user.mediafs.add`),
        /// under the name asked for and the one they have: a relisting
        /// replaces the listing's names and puts these back after them.
        fileprivate var added: [(asked: String, name: String)] = []

        init(listing: (any Listing)?, url: String?, path: String) {
            self.listing = listing
            self.url = url
            self.path = path
        }

        fileprivate func add(_ name: String, _ child: Child) -> String {
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

    /// A probe's (or a listing's) answer not saved yet: the rest of its
    /// metadata is the record's (no bytes; its last access and pin). Kept
    /// apart from the record, 80 bytes a bucket where a whole EntryMeta
    /// took 128, until the flusher appends it to the store's AnswerJournal.
    struct ProbeAnswer {
        var info: ContentInfo
        var validated: Int64

        func meta(url: String, record: EntryRecord?) -> EntryMeta {
            EntryMeta(url: url, info: info, present: ByteRangeSet(),
                      lastAccess: record.map { Int64($0.lastAccess) } ?? validated, lastValidated: validated,
                      pinned: record?.isPinned ?? false)
        }
    }

    final class WeakLoader: Sendable {
        weak let loader: FileLoader?
        init(_ loader: FileLoader?) { self.loader = loader }
    }

    /// What a listing's entry turned out to be, for the caller to act on
    /// once the lock is let go.
    struct Listed {
        /// Loaders of names that left, to stop and flush.
        var dropped: [FileLoader] = []
        /// Files new to the mount.
        var new = 0
        /// Loaders of files the listing may show changed, with what it
        /// shows and their name here: each decides
        /// (`FileLoader.listingShows`) off the lock.
        var changed: [(loader: FileLoader, listed: ContentInfo, name: String)] = []
        /// The directory's names added, removed and changed, for the kernel
        /// (those whose loader finds them changed join once it has).
        var names: NameChanges
    }

    /// What a listing's entry showing another version of a file leaves to
    /// do (`listedChange`).
    enum ListedChange {
        /// The loader compares, off the lock, and tells the kernel itself.
        case compare(FileLoader)
        /// A record with no metadata took the listing's size and date: the
        /// kernel is told of its name with the directory's (NameChanges).
        case learned
    }

    /// Lists its names when a directory source is the mount's root (a
    /// mount of one, as rclone and mountpoint-s3 show a remote's root at
    /// the mountpoint); else they are the sources, one name each.
    let root: Directory
    /// Every URL a name leads to has a loader here or a record in `records`,
    /// never both.
    private(set) var loaders: [String: FileLoader] = [:]
    private(set) var records: [String: EntryRecord] = [:]
    /// Probe answers of loaders turned into records before their metadata
    /// was saved (a listing's entries), and those being saved now: a
    /// loader made meanwhile starts from them. Saved by the flusher into
    /// the journal, with no sync (they claim no bytes), so loaders need
    /// not wait for it.
    private(set) var unsaved: [String: ProbeAnswer] = [:]
    private(set) var saving: [String: EntryMeta] = [:]
    /// Probes of listed entries that have no loader, by URL, while they
    /// run, and failed ones until a stat hands the failure to a loader.
    private(set) var probing: [String: RecordProbe] = [:]
    /// Loaders of URLs no name leads to any more (a listing dropped them,
    /// or `remove`), held weakly: one an open handle or a transfer still
    /// uses is taken back if the URL returns, so one URL never has two.
    private(set) var retired: [String: WeakLoader] = [:]
    /// URLs that joined or left the mount since the evictor's last pass,
    /// which it needs to follow the entries of no mounted file without a
    /// copy of every URL (4 MiB at 100,000). Kept only with an evictor.
    private(set) var membershipChanged: [String] = []
    let tracksMembership: Bool
    /// Entries the evictor removed through the catalog (under its lock):
    /// records read without the lock before one was are read again.
    private(set) var removals = 0
    /// The last pass of the cache limits, for `stats` and to log a change
    /// in whether pinned bytes alone exceed the limit.
    private(set) var lastEviction = CacheEvictor.Report()

    let store: CacheStore
    let context: LoaderContext
    /// Called on every loader that comes to stand for a URL (made, or
    /// taken back from the retired), under the lock: it must not wait.
    let adopted: @Sendable (FileLoader) -> Void

    /// `listedRoot`: the directory source whose entries are the root.
    init(store: CacheStore, context: LoaderContext, tracksMembership: Bool, listedRoot: Source? = nil,
         adopted: @escaping @Sendable (FileLoader) -> Void) {
        root = Directory(listing: listedRoot?.listing, url: listedRoot?.url, path: "")
        self.store = store
        self.context = context
        self.tracksMembership = tracksMembership
        self.adopted = adopted
    }

    /// The record of each URL's metadata, in order, on a few threads.
    static func loadRecords(_ urls: [String], from store: CacheStore) -> [EntryRecord?] {
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

    // MARK: The tree

    func child(_ name: String, of directory: Directory) -> Child? {
        directory.children[name]
    }

    func names(of directory: Directory) -> [String] {
        directory.order
    }

    /// The names of a directory with what each is, in order.
    func children(of directory: Directory) -> [(name: String, child: Child)] {
        directory.order.compactMap { name in directory.children[name].map { (name, $0) } }
    }

    /// Adds a source to a directory under its name (made unique); returns
    /// the name. A file new to the mount gets a record of its metadata (read
    /// here, see `liveLoader`), or back the loader it had, if that is still
    /// in use. What the source's listing knew of the file fills a record
    /// that knows no size, as a probe's answer would.
    mutating func insert(_ source: Source, into directory: Directory, read: EntryRecord? = nil) -> String {
        if let listing = source.listing {
            let name = directory.naming.peek(source.name) { directory.children[$0] != nil }
            return directory.add(source.name, .directory(Directory(listing: listing, url: source.url,
                                                                   path: directory.path + "/" + name)))
        }
        let name = directory.add(source.name, .file(source.url))
        let url = source.url
        if loaders[url] == nil && records[url] == nil {
            noteMembership(url)
            if let loader = retired.removeValue(forKey: url)?.loader {
                adopted(loader)
                loaders[url] = loader
            } else {
                records[url] = read ?? EntryRecord(meta: store.loadMeta(forKey: url), store: store)
            }
        }
        if let info = source.listedInfo { _ = learn(info, of: url, at: context.settings.clock.wall()) }
        return name
    }

    /// A record that knows no size takes `info` (a probe's or a listing's
    /// answer), to be saved with the unsaved answers. Returns whether it
    /// did.
    mutating func learn(_ info: ContentInfo, of url: String, at now: Double, replacing: Bool = false) -> Bool {
        guard var record = records[url], record.size == nil || replacing else { return false }
        record.take(info)
        record.lastAccess = now
        record.hasMeta = true
        records[url] = record
        unsaved[url] = ProbeAnswer(info: info, validated: Int64(now))
        return true
    }

    /// The loader to ask whether a listing's `listed` shows another version
    /// of the file at `url` (named `path`) than the one the mount knows, or
    /// nil when nothing can be stale: a loader in use compares; a record
    /// whose metadata may hold bytes of another version (`mayDiffer`)
    /// becomes a loader to compare, so its bytes are dropped and the
    /// kernel told now, not at the next open; one with no metadata left
    /// (evicted) just takes the listing's size and date.
    mutating func listedChange(of url: String, named path: String, to listed: ContentInfo, at now: Double)
        -> ListedChange? {
        if let loader = loaders[url] { return .compare(loader) }
        guard let record = records[url], record.mayDiffer(from: listed) else { return nil }
        guard record.hasMeta else {
            return learn(listed, of: url, at: now, replacing: true) ? .learned : nil
        }
        return liveLoader(url: url, path: path).map { .compare($0) }
    }

    /// Which of a listing's files are new to the mount: their records are
    /// read (`loadRecords`) before `relist`, without the lock, so a lookup
    /// elsewhere in the mount never waits on the disk reads of a refresh
    /// (a remount's listing of 100,000 read for 3 s).
    func newFiles(in sources: [Source]) -> (isNew: [Bool], removals: Int) {
        (sources.map { !$0.isDirectory && loaders[$0.url] == nil && records[$0.url] == nil }, removals)
    }

    /// Replaces a directory's names by a new listing's. `read` holds the
    /// records of the files `newFiles` found new, in listing order, read
    /// when the evictor had removed `removals` entries: if it removed any
    /// since, they are read again here, under the lock, so no record claims
    /// bytes of an entry gone to the trash. Directories the listing kept
    /// stay the same objects (their own listings with them); names that
    /// left (a file, or a directory and all below it) take their loaders
    /// with them, unless another name still leads there. Says which names
    /// were added, removed or changed, for the kernel (NameChanges).
    mutating func relist(_ directory: Directory, with sources: [Source], isNew: [Bool], read: [EntryRecord?],
                         readAt readRemovals: Int, at now: Double, believedFor: Double) -> Listed {
        let old = directory.children
        // Before its first listing no lookup of its names was answered, so
        // the kernel holds none of them.
        let kernelSawNames = directory.listedAt != nil
        directory.order = []
        directory.children = [:]
        directory.naming = FileNaming()
        let stale = readRemovals != removals
        var records = stale ? [] : read
        if stale {
            records = Self.loadRecords(zip(sources, isNew).compactMap { $1 ? $0.url : nil }, from: store)
        }
        // Taken in listing order as the entries are inserted: a dictionary
        // of them by URL took 16 MiB at 100,000.
        var next = records.makeIterator()
        // Grown once, not doubling 17 times with the old and new tables both held.
        self.records.reserveCapacity(self.records.count + records.count)
        directory.children.reserveCapacity(sources.count)
        directory.order.reserveCapacity(sources.count)
        var changed: [(loader: FileLoader, listed: ContentInfo, name: String)] = []
        var learned: [String] = []
        let wall = context.settings.clock.wall()
        for (source, isNew) in zip(sources, isNew) {
            let record = isNew ? next.next() ?? nil : nil
            var safe = source
            safe.name = FileNaming.safe(source.name)
            if source.isDirectory, case .directory(let existing)? = old[safe.name], existing.url == source.url {
                _ = directory.add(safe.name, .directory(existing))
            } else {
                let name = insert(safe, into: directory, read: record)
                if let listed = source.listedInfo {
                    switch listedChange(of: source.url, named: directory.path + "/" + name, to: listed, at: wall) {
                    case .compare(let loader)?: changed.append((loader, listed, name))
                    case .learned?: learned.append(name)
                    case nil: break
                    }
                }
            }
        }
        putBackAdded(in: directory, old: old)
        directory.listedAt = now
        directory.refreshAt = now + believedFor
        let kept = Set(directory.children.values.map(\.identity))
        let left = old.values.contains { !kept.contains($0.identity) }
        var names = NameChanges(directory: directory.path)
        if kernelSawNames {
            names = NameChanges.between(old, directory.children, in: directory.path) { $0.identity == $1.identity }
            if !learned.isEmpty { names.changed = Array(Set(names.changed).union(learned)).sorted() }
        }
        return Listed(dropped: left ? retireUnreferenced() : [], new: records.count, changed: changed, names: names)
    }

    /// Names added at run time follow a new listing's, each under the name
    /// it asked for unless the listing took it (the listing wins: the added
    /// one is numbered). One whose name changed is a directory of another
    /// path, made anew (listed again on its next lookup, from its saved
    /// listing).
    private mutating func putBackAdded(in directory: Directory, old: [String: Child]) {
        directory.added = directory.added.compactMap { asked, name in
            guard let child = old[name] else { return nil }
            let unique = directory.naming.peek(asked) { directory.children[$0] != nil }
            guard case .directory(let sub) = child, unique != name else {
                return (asked, directory.add(asked, child))
            }
            let moved = Directory(listing: sub.listing, url: sub.url, path: directory.path + "/" + unique)
            return (asked, directory.add(asked, .directory(moved)))
        }
    }

    /// Adds a source to the root at run time; returns its name. A listed
    /// root keeps it apart from its listing's names, so a relisting keeps it.
    mutating func addToRoot(_ source: Source) -> String {
        let name = insert(source, into: root)
        if root.listing != nil { root.added.append((source.name, name)) }
        return name
    }

    /// Removes a name from the root. ENOENT when there is none; at a listed
    /// root, EROFS for a name its listing gave: only names added at run
    /// time can go, a listed one would come back with the next listing.
    mutating func removeFromRoot(_ name: String) throws -> [FileLoader] {
        guard root.children[name] != nil else {
            throw MediaError(ENOENT, "no file named '\(name)' in the mount root")
        }
        if root.listing != nil {
            guard let index = root.added.firstIndex(where: { $0.name == name }) else {
                throw MediaError(EROFS, "'\(name)' is listed by the mount's source, not added: only added names "
                                 + "can be removed (a listed one comes back with the next listing)")
            }
            root.added.remove(at: index)
        }
        root.children[name] = nil
        root.order.removeAll { $0 == name }
        return retireUnreferenced()
    }

    // MARK: Listing times

    func isListed(_ directory: Directory) -> Bool {
        directory.listedAt != nil
    }

    /// Whether a listed directory is due a background refresh at `now`;
    /// if so it is marked refreshing, so one lookup queues it.
    func claimRefresh(of directory: Directory, at now: Double) -> Bool {
        guard directory.listedAt != nil, !directory.refreshing, directory.listing?.refreshes == true,
              now >= directory.refreshAt else { return false }
        directory.refreshing = true
        return true
    }

    func refreshEnded(of directory: Directory) {
        directory.refreshing = false
    }

    /// What `doubt` says of a listing of `urls` that would replace the
    /// directory's names at `now`. A doubted one keeps the old names and has
    /// the directory listed again when the doubt can end; any other ends
    /// the doubt. Names added at run time are not the listing's.
    func judge(_ directory: Directory, listing urls: Set<String>, by doubt: ListingDoubt,
               at now: Double) -> ListingDoubt.Verdict {
        guard directory.listedAt != nil else { return .believed }
        let added = Set(directory.added.map(\.name))
        var previous = 0
        var kept = 0
        for (name, child) in directory.children where !added.contains(name) {
            previous += 1
            let url: String?
            switch child {
            case .file(let file): url = file
            case .directory(let inner): url = inner.url
            }
            if let url, urls.contains(url) { kept += 1 }
        }
        let verdict = doubt.verdict(previous: previous, kept: kept, since: directory.doubtedSince, now: now)
        if case .doubted(_, _, let until) = verdict {
            if directory.doubtedSince == nil { directory.doubtedSince = now }
            directory.refreshAt = until
        } else {
            directory.doubtedSince = nil
        }
        return verdict
    }

    /// A listing failed: tried again at `retryAt`.
    func listingFailed(of directory: Directory, retryAt: Double) {
        directory.refreshAt = retryAt
    }

    // MARK: Loaders and records

    /// The loader of a mounted URL, made from the cache if only its record
    /// was kept; nil when no name leads to the URL. Under the lock because
    /// the loader reads the entry's metadata under it, and the evictor
    /// removes an entry only under it and while no loader stands for it, so
    /// no loader claims bytes from a directory moved to the trash.
    mutating func liveLoader(url: String, path: String) -> FileLoader? {
        if let loader = loaders[url] { return loader }
        guard let record = records.removeValue(forKey: url) else { return nil }
        let pending = unsaved.removeValue(forKey: url)?.meta(url: url, record: record) ?? saving[url]
        let preloaded: EntryMeta?? = pending.map { .some($0) } ?? (record.hasMeta ? nil : .some(nil))
        // One in use elsewhere would otherwise be a second loader on the entry.
        let loader = retired.removeValue(forKey: url)?.loader
            ?? FileLoader(source: Source(name: path, url: url), context: context, meta: preloaded)
        if record.listed { _ = loader.markListed() }
        if record.isScanOnly { loader.markScanOnly() }
        // It saves its metadata itself from now on.
        if pending != nil { loader.markUnsaved() }
        adopted(loader)
        loaders[url] = loader
        return loader
    }

    /// Drops the loaders no name in the tree leads to any more, keeping
    /// them weakly (`retired`); returns them, to stop and flush once the
    /// lock is let go. Linear in the tree.
    mutating func retireUnreferenced() -> [FileLoader] {
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
    /// the mount.
    mutating func dropDeadRetired() {
        let dead = retired.compactMap { $0.value.loader == nil ? $0.key : nil }
        for url in dead {
            retired[url] = nil
            noteMembership(url)
        }
    }

    /// Whether a name leads to the URL, or a retired loader of it is still
    /// in use (its bytes are freed through it).
    func isMounted(_ url: String) -> Bool {
        loaders[url] != nil || records[url] != nil || retired[url]?.loader != nil
    }

    /// A URL joined or left the mount: the evictor's next pass hears of it.
    mutating func noteMembership(_ url: String) {
        if tracksMembership { membershipChanged.append(url) }
    }

    /// Retired loaders something still uses.
    var retiredInUse: [FileLoader] {
        retired.values.compactMap(\.loader)
    }

    /// The records read for the mount's arguments before it starts, in the
    /// order of `urls` (`loadRecords`).
    mutating func keep(records read: [EntryRecord?], of urls: [String]) {
        records.reserveCapacity(records.count + urls.count)
        for (url, record) in zip(urls, read) { records[url] = record }
    }

    /// Turns the loader of `url` into a record, when nothing but the catalog
    /// holds it and it is idle (`FileLoader.idleRecord`); its unsaved probe
    /// answer goes with the record. Returns whether it did.
    mutating func retireIfIdle(_ url: String) -> Bool {
        // Out of the dictionary, so that only this reference counts.
        guard var loader = loaders.removeValue(forKey: url) else { return false }
        guard isKnownUniquelyReferenced(&loader), let idle = loader.idleRecord() else {
            loaders[url] = loader
            return false
        }
        // Unique and idle under the lock: nothing changes its data file now.
        var record = idle.record
        if record.cachedBytes > 0 { record.allocatedBytes = EntryRecord.allocatedBytes(forKey: url, in: store) }
        records[url] = record
        if let meta = idle.unsaved { unsaved[url] = ProbeAnswer(info: meta.info, validated: meta.lastValidated) }
        return true
    }

    /// A listing showed the record's file with no size known: its probe is
    /// the listing's (`RecordProber`). Returns whether it has a record.
    mutating func markListed(_ url: String) -> Bool {
        guard records[url] != nil else { return false }
        records[url]?.listed = true
        return true
    }

    // MARK: Record probes

    /// The probe that will fill the record of `url`: the one running, or a
    /// new one, kept in `probing` until it ends, when the URL has a record
    /// (no loader) whose size is unknown. The one place a record probe is
    /// begun; its request is sent off the lock (`RecordProber`).
    mutating func beginRecordProbe(of url: String, clock: Clock) -> (probe: RecordProbe, isNew: Bool)? {
        guard loaders[url] == nil, let record = records[url], record.size == nil else { return nil }
        if let running = probing[url] { return (running, false) }
        let probe = RecordProbe(clock: clock)
        probing[url] = probe
        return (probe, true)
    }

    /// A record probe ended; a failed one is ended by the stat that hands
    /// its failure to a loader (`RecordProber.awaitRecordProbe`).
    mutating func endRecordProbe(_ probe: RecordProbe, of url: String) {
        if probing[url] === probe { probing[url] = nil }
    }

    /// A record probe's answer: into the record and the unsaved answers,
    /// unless a loader was made meanwhile, which is returned to be offered
    /// it. `batchFull`: the unsaved answers just reached a batch, for the
    /// flusher to save now.
    mutating func recordProbeAnswered(_ probe: RecordProbe, of url: String, with info: ContentInfo, at now: Double)
        -> (loader: FileLoader?, batchFull: Bool) {
        endRecordProbe(probe, of: url)
        if let loader = loaders[url] { return (loader, false) }
        return (nil, learn(info, of: url, at: now) && unsaved.count == CatalogMaintenance.saveBatch)
    }

    // MARK: Saving answers

    /// Up to `limit` unsaved answers, moved to `saving` while the flusher
    /// writes them: a loader made meanwhile starts from them.
    mutating func takeUnsaved(limit: Int) -> [(url: String, meta: EntryMeta)] {
        var batch: [(url: String, meta: EntryMeta)] = []
        for (url, answer) in unsaved {
            batch.append((url, answer.meta(url: url, record: records[url])))
            if batch.count == limit { break }
        }
        for entry in batch {
            unsaved[entry.url] = nil
            saving[entry.url] = entry.meta
        }
        // Emptied, it gives its buckets back (16 MiB at 100,000).
        if unsaved.isEmpty { unsaved = [:] }
        return batch
    }

    /// A batch of `takeUnsaved` is written: a loader made for one of its
    /// URLs meanwhile saves its own metadata again, so the last save is
    /// the loader's.
    mutating func saved(_ batch: [(url: String, meta: EntryMeta)]) {
        for entry in batch {
            saving[entry.url] = nil
            loaders[entry.url]?.markUnsaved()
        }
    }

    // MARK: Eviction

    /// What an eviction pass works on: the mounted loaders by URL (the
    /// retired ones still in use count: their bytes are freed through
    /// them, never from under them), the records that hold bytes, and the
    /// URLs whose membership changed since the last pass (then forgotten).
    mutating func evictionView() -> (mounted: [String: FileLoader], recorded: [(url: String, usage: FileUsage)],
                                     changed: [(url: String, mounted: Bool)]) {
        dropDeadRetired()
        var mounted = loaders
        for (url, weak) in retired where mounted[url] == nil {
            if let loader = weak.loader { mounted[url] = loader }
        }
        // Only what holds bytes: a copy of every record would be copied
        // whole (18 MiB at 100,000) by the first probe answer the pass met.
        var recorded: [(url: String, usage: FileUsage)] = []
        for (url, record) in records where record.allocatedBytes > 0 { recorded.append((url, record.usage)) }
        let changed = membershipChanged.map { (url: $0, mounted: isMounted($0)) }
        membershipChanged = []
        return (mounted, recorded, changed)
    }

    /// Every mounted URL (`isMounted`).
    func mountedURLs() -> [String] {
        Array(loaders.keys) + Array(records.keys) + retired.keys.filter(isMounted)
    }

    /// The evictor removes an entry of no loader: `remove` runs under the
    /// lock that making a loader (and loading its metadata) holds, and the
    /// record keeps no bytes. False, and nothing removed, when the URL has
    /// a loader, retired or not.
    mutating func evict(_ url: String, remove: () -> Void) -> Bool {
        guard loaders[url] == nil, retired[url]?.loader == nil else { return false }
        remove()
        removals += 1
        records[url]?.dropBytes()
        return true
    }

    /// Keeps an eviction pass's report; returns the last one's.
    mutating func noteEviction(_ report: CacheEvictor.Report) -> CacheEvictor.Report {
        defer { lastEviction = report }
        return lastEviction
    }

    // MARK: Paths

    /// Each file URL's path (the first name that leads to it). Linear in
    /// the tree.
    func pathsOfFiles() -> [String: String] {
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

    /// Every path in the mount whose name leads to one of `urls`.
    func paths(of urls: Set<String>) -> [String] {
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

    /// Every file's first path and URL, for a walk over the whole mount.
    func files() -> [(path: String, url: String)] {
        var found: [(path: String, url: String)] = []
        func walk(_ directory: Directory) {
            for (name, child) in directory.children {
                switch child {
                case .file(let url): found.append((directory.path + "/" + name, url))
                case .directory(let sub): walk(sub)
                }
            }
        }
        walk(root)
        return found
    }
}
