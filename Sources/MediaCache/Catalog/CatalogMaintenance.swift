// The catalog's upkeep: the flusher thread (Flusher.swift owns when its
// passes run) and what a pass does: save loaders' metadata, turn idle
// loaders back into records, save the probe answers kept with records, and
// apply the cache limits through the evictor, measuring the room under them
// that new bytes take (`CacheBudget`, which wakes the flusher when it is
// pressed).
//
// Shares the catalog's `state`; flushes loaders without it, and turns an idle
// one into a record under it (`CatalogState.retireIfIdle`, which asks the
// loader's `idleRecord`: catalog → loader).
import CSystem
import Foundation
import MediaStore
import MediaSupport

final class CatalogMaintenance: Sendable {
    /// Loaders turned into records in one pass past which the heap's holes
    /// are given back (a listing's probed entries, about 1 KiB each).
    static let trimAfterRetiring = 1_000
    static let trimDuringPass = 10_000
    /// Probe answers saved between two looks at the catalog's lock; the
    /// flusher is woken when this many wait (AnswerJournal: a few µs each).
    static let saveBatch = 512

    let flusher: Flusher
    /// Nil: no limits (`--cache-max-size` and its kind unset).
    let evictor: CacheEvictor?
    /// Room under the limits for new bytes, so they hold at every instant.
    let budget: CacheBudget?
    /// Probe answers saved since the heap was last trimmed (the flusher's).
    private let answersSaved = Locked(0)
    /// The catalog's tree, loaders and records.
    private let state: Locked<CatalogState>
    private let store: CacheStore
    private let statistics: Statistics
    private let clock: Clock

    /// `flusher` and `budget` are made before the catalog's state, whose
    /// loaders' context carries the budget (`budget(for:waking:)`).
    init(flusher: Flusher, budget: CacheBudget?, limits: CacheLimits?, state: Locked<CatalogState>,
         store: CacheStore, statistics: Statistics, clock: Clock) {
        self.flusher = flusher
        self.budget = budget
        evictor = limits.map { CacheEvictor(store: store, limits: $0) }
        self.state = state
        self.store = store
        self.statistics = statistics
        self.clock = clock
    }

    /// The room under `limits` (nil without limits): pressed, it wakes the
    /// flusher, whose pass makes room at once.
    static func budget(for limits: CacheLimits?, waking flusher: Flusher) -> CacheBudget? {
        limits.map { _ in CacheBudget { flusher.wake() } }
    }

    /// Whether a pass is due now for the room's sake: a scan that found no
    /// room presses only the scan budget, and its pass must run then too, or
    /// the scan's read waits for the next timed pass (decision 0013).
    var isPressed: Bool { budget.map { $0.isPressed || $0.isScanPressed } ?? false }

    /// Applies the limits once now, then starts the flusher's thread. The
    /// first pass comes before any request: until the room under the
    /// limits is measured there is none, and reads would wait for it,
    /// readahead and preload would fetch nothing. Each pass also runs
    /// `readAgain` and asks `probesDrained` (see `flushPass`).
    func start(readAgain: @escaping @Sendable () -> Void, probesDrained: @escaping @Sendable () -> Bool) {
        applyLimits()
        let store = self.store
        flusher.start(prologue: {
            store.emptyTrash()
            // The metadata read at mount left its buffers' holes.
            mediafs_malloc_trim()
        }, pass: { [self] due, pressed in
            flushPass(due: due, pressed: pressed, readAgain: readAgain, probesDrained: probesDrained)
        // A pass runs when the room is pressed too (`isPressed`).
        }, isPressed: { [self] in isPressed })
    }

    /// Saves every loader's metadata, those retired while in use included.
    func flushAll() {
        let (live, retiredInUse) = state.withLock { (Array($0.loaders.values), $0.retiredInUse) }
        for loader in live + retiredInUse { loader.flush() }
    }

    /// One pass of the flusher. Woken early when a write found no room:
    /// room is made at once, and a flush runs only when one is due. Woken
    /// for a backlog (a listing's probed entries): loaders to records, and
    /// their answers saved, a slice at a time.
    /// `readAgain`: what else is due each pass (ListingService's reading
    /// again of saved arguments); `probesDrained`: whether a listing's
    /// probes ended since it was last asked (RecordProber's feeder).
    func flushPass(due: Bool, pressed: Bool, readAgain: () -> Void, probesDrained: () -> Bool) -> Flusher.Backlog {
        let retiredNow = flushAndRetire(flushing: due)
        let saved = saveUnsaved(until: Deadline.after(seconds: Flusher.saveSlice, clock: clock))
        if due || pressed { applyLimits() }
        readAgain()
        // A listing's probes free as much as they took (a request, a
        // transfer and buffers an entry), in holes malloc keeps; so do
        // loaders turned into records. Given back here, off the network
        // thread, and every 10,000 answers while the probes run, which
        // lowers a cold `ls -l`'s peak too (decision 0025).
        let answersSinceTrim = answersSaved.withLock { count in
            count += saved
            return count
        }
        if probesDrained() || retiredNow >= Self.trimAfterRetiring || answersSinceTrim >= Self.trimDuringPass {
            mediafs_malloc_trim()
            answersSaved.withLock { $0 = 0 }
        }
        let (unsaved, loaders) = state.withLock { ($0.unsaved.count, $0.loaders.count) }
        return unsaved > 0 ? .answers : loaders >= Self.trimAfterRetiring ? .loaders : .none
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
        let (urls, retiredInUse) = state.withLock { (Array($0.loaders.keys), $0.retiredInUse) }
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
        let loader = state.withLock { $0.loaders[url] }
        loader?.flush()
        return loader != nil
    }

    private func retireIfIdle(_ url: String) -> Bool {
        state.withLock { $0.retireIfIdle(url) }
    }

    /// Saves the probe answers kept with records, a batch at a time, until
    /// `deadline`. A loader made for one while it is written starts from
    /// it, and saves its own again after: the last save is the loader's.
    @discardableResult
    func saveUnsaved(until deadline: Deadline) -> Int {
        var saved = 0
        while !deadline.hasPassed {
            let batch = state.withLock { $0.takeUnsaved(limit: Self.saveBatch) }
            guard !batch.isEmpty else { return saved }
            saved += batch.count
            do {
                try store.saveAnswers(batch.map(\.meta))
            } catch {
                // Costs probes at the next mount, as a failed flush would.
                statistics.cacheWriteFailed(error as? MediaError ?? MediaError.io("\(error)"))
            }
            state.withLock { $0.saved(batch) }
        }
        return saved
    }

    /// One eviction pass over the mount's loaders and records, measuring
    /// the room left.
    func applyLimits() {
        let (byURL, recorded, changed) = state.withLock { $0.evictionView() }
        let membership = CacheEvictor.Membership(all: { [self] in state.withLock { $0.mountedURLs() } },
                                                 changed: changed)
        // Where each URL is, found once a pass and only if a record must go.
        var paths: [String: String]?
        guard let report = evictor?.run(mounted: byURL, records: recorded, membership: membership, budget: budget,
                                        now: Int64(clock.wall()),
                                        removing: { [self] url, remove in
            state.withLock { $0.evict(url, remove: remove) }
        }, loading: { [self] url in
            state.withLock { state in
                if paths == nil { paths = state.pathsOfFiles() }
                guard let path = paths?[url] else { return nil }
                return state.liveLoader(url: url, path: path)
            }
        }) else { return }
        statistics.countEvictions(report.evictedEntries)
        noteEviction(report)
    }

    /// Keeps the last pass's report, and says once when pinned bytes alone
    /// come to exceed the size limit, or the disk leaves no room, and once
    /// when they fit again.
    private func noteEviction(_ report: CacheEvictor.Report) {
        let was = state.withLock { $0.noteEviction(report) }
        guard let limits = evictor?.limits else { return }
        if was.pinnedOverLimit != report.pinnedOverLimit {
            if report.pinnedOverLimit {
                Log.warning("pinned files take \(report.pinnedBytes) bytes, more than the cache limit of \(limits.maxSize): "
                            + "every unpinned byte is evicted and new bytes pass uncached; unpin some files")
            } else {
                Log.info("pinned files fit under the cache limit again (\(report.pinnedBytes) of \(limits.maxSize) bytes)")
            }
        }
        if was.noDiskRoom != report.noDiskRoom {
            let free = report.freeBytes.map { Units.describe($0) } ?? "an unknown amount"
            if report.noDiskRoom {
                Log.warning("the cache's disk has \(free) free, less than --cache-min-free \(Units.describe(limits.minFree)) "
                            + "leaves room for: reads pass through uncached, at network speed, until room returns "
                            + "(a lower --cache-min-free, or --cache-dir on a disk with room, would cache them)")
            } else {
                Log.info("the cache's disk has room again (\(free) free, --cache-min-free "
                         + "\(Units.describe(limits.minFree))): new bytes are cached again")
            }
        }
    }
}
