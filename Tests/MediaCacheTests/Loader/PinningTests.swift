// Pinned files against eviction, trimming, the limits and a remount: loaders
// filled through a FakeFetcher, the evictor run by hand, with and without
// the mount's loaders (the offline `cache gc`).
import Foundation
import XCTest
@testable import MediaCache
@testable import MediaSources
@testable import MediaSegmented
@testable import MediaStore
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport

final class PinningTests: XCTestCase {
    private var base = ""
    private var store: CacheStore!
    private var fetcher: FakeFetcher!
    private let pinnedURL = "https://media.example/keep.mp4"
    private let otherURL = "https://media.example/other.mp4"
    private static let size = 300_000

    override func setUpWithError() throws {
        base = try TemporaryDirectory.make("pinning")
        store = try CacheStore(root: base)
        fetcher = FakeFetcher()
        fetcher.add(pinnedURL, bytes: [UInt8](repeating: 1, count: Self.size))
        fetcher.add(otherURL, bytes: [UInt8](repeating: 2, count: Self.size))
    }

    override func tearDownWithError() throws {
        fetcher.shutdown()
        try? FileManager.default.removeItem(atPath: base)
    }

    private func makeLoader(_ url: String, budget: CacheBudget? = nil) -> FileLoader {
        var settings = LoaderSettings()
        settings.timeout = 5
        return FileLoader(source: Source(name: url, url: url), store: store, fetcher: fetcher, settings: settings,
                          budget: budget)
    }

    /// Reads the whole file and waits for its transfer to end (a read
    /// returns as its bytes arrive), then saves its metadata.
    private func fill(_ loader: FileLoader) throws {
        var buffer = [UInt8](repeating: 0, count: Self.size)
        let count = try buffer.withUnsafeMutableBytes { try loader.read(into: $0, at: 0, pattern: ReadPattern()) }
        XCTAssertEqual(count, Self.size)
        XCTAssertTrue(fetcher.waitUntil { _ in loader.status().state == .idle })
        loader.flush()
    }

    private func limits(maxSize: Int64) -> CacheLimits {
        var limits = CacheLimits()
        limits.maxSize = maxSize
        limits.minFree = 0
        return limits
    }

    func testAPinnedFile_refusesEvictionAndTrimming_butAPurgeStillFreesIt() throws {
        let loader = makeLoader(pinnedURL)
        try fill(loader)
        loader.setPinned(true)
        XCTAssertFalse(loader.evict())
        loader.trim(to: 0)
        XCTAssertTrue(loader.status().isComplete, "a pinned file lost bytes to eviction or trimming")
        loader.purge()
        XCTAssertEqual(loader.status().cachedBytes, 0)
        XCTAssertTrue(loader.isPinned, "a purge drops the bytes, not the pin")
    }

    func testUnpinning_letsTheFileBeEvicted() throws {
        let loader = makeLoader(pinnedURL)
        try fill(loader)
        loader.setPinned(true)
        XCTAssertFalse(loader.evict())
        loader.setPinned(false)
        XCTAssertTrue(loader.evict())
        XCTAssertEqual(loader.status().cachedBytes, 0)
    }

    func testThePin_isSavedAtOnce_andOutlivesTheLoader() throws {
        // One loader an entry at a time: each is done with before the next is made.
        do {
            let first = makeLoader(pinnedURL)
            try fill(first)
            first.setPinned(true)
            // No flush after the pin: setPinned saves it itself.
            XCTAssertEqual(store.loadMeta(forKey: pinnedURL)?.pinned, true)
        }
        do {
            let remounted = makeLoader(pinnedURL)
            XCTAssertTrue(remounted.isPinned)
            XCTAssertTrue(remounted.status().isComplete)
            remounted.setPinned(false)
        }
        XCTAssertFalse(makeLoader(pinnedURL).isPinned)
    }

    func testTheEvictor_overTheSizeLimit_evictsUnpinnedFilesAndNeverThePinnedOne() throws {
        let pinned = makeLoader(pinnedURL)
        let other = makeLoader(otherURL)
        try fill(pinned)
        pinned.setPinned(true)
        try fill(other)
        // The pinned file is the least recently used: LRU alone would take it first.
        pinned.lock.withLock { $0.accessed(at: $0.use.lastAccess - 100) }
        let evictor = CacheEvictor(store: store, limits: limits(maxSize: Int64(Self.size) * 3 / 2))
        let report = evictor.run(mounted: [pinnedURL: pinned, otherURL: other], now: Int64(time(nil)) + 10)
        XCTAssertTrue(pinned.status().isComplete)
        XCTAssertEqual(other.status().cachedBytes, 0)
        XCTAssertGreaterThanOrEqual(report.pinnedBytes, Int64(Self.size))
        XCTAssertFalse(report.pinnedOverLimit)
    }

    func testTheEvictor_takesTheFileReadFirst_whenBothWereReadWithinOneSecond() throws {
        // Whole seconds made these a tie, and the loaders' dictionary order
        // then chose: a test saw the newer file evicted and the older kept.
        let older = makeLoader(otherURL)
        let newer = makeLoader(pinnedURL)
        try fill(older)
        try fill(newer)
        let second = newer.lock.withLock { state in
            let second = state.use.lastAccess.rounded(.down)
            state.accessed(at: second + 0.9)
            return second
        }
        older.lock.withLock { $0.accessed(at: second + 0.1) }
        let evictor = CacheEvictor(store: store, limits: limits(maxSize: Int64(Self.size) * 3 / 2))
        evictor.run(mounted: [otherURL: older, pinnedURL: newer], now: Int64(second) + 1)
        XCTAssertEqual(older.status().cachedBytes, 0, "the file read first is evicted first")
        XCTAssertTrue(newer.status().isComplete)
    }

    func testPinnedBytesAloneOverTheLimit_areKept_saySo_andLeaveNoRoomForNewBytes() throws {
        // Filled and pinned with no limit, then mounted under a limit the
        // pinned bytes alone pass: the catalog's eviction pass says so.
        do {
            let first = makeLoader(pinnedURL)
            try fill(first)
            first.setPinned(true)
        }
        var settings = LoaderSettings()
        settings.timeout = 5
        let catalog = Catalog(sources: [Source(name: "keep.mp4", url: pinnedURL),
                                        Source(name: "other.mp4", url: otherURL)],
                              store: store, fetcher: fetcher, settings: settings,
                              limits: limits(maxSize: Int64(Self.size) / 2))
        let said = Log.capturing { catalog.maintenance.applyLimits() }
        let warnings = said.filter {
            $0.level == .warning && $0.message.hasPrefix("pinned files take ")
                && $0.message.contains("more than the cache limit of \(Self.size / 2)")
        }
        XCTAssertEqual(warnings.count, 1, "\(said)")
        XCTAssertTrue(try catalog.file(at: "/keep.mp4").status().isComplete)
        // Said once, not at every pass.
        let again = Log.capturing { catalog.maintenance.applyLimits() }
        XCTAssertFalse(again.contains { $0.message.hasPrefix("pinned files") }, "\(again)")
        // A read of another file still gets its bytes, from the network alone:
        // new bytes pass uncached while pinned bytes fill the limit.
        let other = try catalog.file(at: "/other.mp4")
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = try buffer.withUnsafeMutableBytes { try other.read(into: $0, at: 0, pattern: ReadPattern()) }
        XCTAssertEqual(count, 4096)
        XCTAssertEqual(buffer, [UInt8](repeating: 2, count: 4096))
        XCTAssertTrue(fetcher.waitUntil { _ in other.status().state == .idle })
        XCTAssertEqual(other.status().cachedBytes, 0)
        // Unpinned, the file goes at the next pass, and that is said too.
        try catalog.file(at: "/keep.mp4").setPinned(false)
        let fits = Log.capturing { catalog.maintenance.applyLimits() }
        XCTAssertTrue(fits.contains { $0.level == .info && $0.message.hasPrefix("pinned files fit under") }, "\(fits)")
    }

    func testTheOfflineEvictor_keepsAPinnedEntryPastItsAgeAndSizeLimits() throws {
        let pinned = makeLoader(pinnedURL)
        let other = makeLoader(otherURL)
        try fill(pinned)
        pinned.setPinned(true)
        try fill(other)
        let evictor = CacheEvictor(store: store, limits: limits(maxSize: 1))
        let report = evictor.run(now: Int64(time(nil)) + 365 * 86_400)
        XCTAssertEqual(report.evictedEntries, 1)
        XCTAssertEqual(store.loadMeta(forKey: pinnedURL)?.isComplete, true)
        XCTAssertNil(store.loadMeta(forKey: otherURL))
        XCTAssertTrue(report.pinnedOverLimit)
    }

    func testTheEvictor_leavesAnEntryWithoutALoaderThatOneNowStandsFor() throws {
        // A loader made after the pass's snapshot (a listing refresh) must
        // not find its directory moved to the trash under it.
        let other = makeLoader(otherURL)
        try fill(other)
        let evictor = CacheEvictor(store: store, limits: limits(maxSize: 1))
        var asked: [String] = []
        var report = evictor.run(now: Int64(time(nil)) + 365 * 86_400) { url, _ in
            asked.append(url)
            return false
        }
        XCTAssertEqual(Set(asked), [otherURL])
        XCTAssertEqual(report.evictedEntries, 0)
        XCTAssertEqual(store.loadMeta(forKey: otherURL)?.isComplete, true, "evicted although in use")
        // The next pass, with no loader standing for it, removes it.
        report = CacheEvictor(store: store, limits: limits(maxSize: 1)).run(now: Int64(time(nil)) + 365 * 86_400) {
            _, remove in
            remove()
            return true
        }
        XCTAssertEqual(report.evictedEntries, 1)
        XCTAssertNil(store.loadMeta(forKey: otherURL))
    }

    func testTheEvictor_readsBackTheEntryOfAFileThatLeftTheMount_andEvictsIt() throws {
        let other = makeLoader(otherURL)
        try fill(other)
        let evictor = CacheEvictor(store: store, limits: limits(maxSize: 4 * Int64(Self.size)))
        let farFuture = Int64(time(nil)) + 365 * 86_400
        // The first pass skips the mount's entries: they go through their loaders.
        XCTAssertEqual(evictor.run(mounted: [otherURL: other], now: Int64(time(nil))).evictedEntries, 0)
        // Gone from the mount, unreported: the evictor does not know of it.
        var asked: [String] = []
        let removing: (String, () -> Void) -> Bool = { url, remove in
            asked.append(url)
            remove()
            return true
        }
        XCTAssertEqual(evictor.run(now: farFuture, removing: removing).evictedEntries, 0)
        XCTAssertEqual(asked, [])
        let report = evictor.run(membership: CacheEvictor.Membership(changed: [(url: otherURL, mounted: false)]),
                                 now: farFuture, removing: removing)
        XCTAssertEqual(report.evictedEntries, 1, "the entry of a file that left must be evictable")
        XCTAssertEqual(asked, [otherURL])
        XCTAssertNil(store.loadMeta(forKey: otherURL))
    }

    func testTheEvictor_forgetsTheEntryOfAFileThatJoinedTheMount() throws {
        try fill(makeLoader(otherURL))
        let evictor = CacheEvictor(store: store, limits: limits(maxSize: 4 * Int64(Self.size)))
        // Indexed as no mounted file's entry.
        XCTAssertEqual(evictor.run(now: Int64(time(nil))).evictedEntries, 0)
        var asked: [String] = []
        let report = evictor.run(membership: CacheEvictor.Membership(changed: [(url: otherURL, mounted: true)]),
                                 now: Int64(time(nil)) + 365 * 86_400) { url, remove in
            asked.append(url)
            remove()
            return true
        }
        // Mounted now, and held by no loader or record given: left alone.
        XCTAssertEqual(report.evictedEntries, 0)
        XCTAssertEqual(asked, [])
        XCTAssertEqual(store.loadMeta(forKey: otherURL)?.isComplete, true)
    }
}
