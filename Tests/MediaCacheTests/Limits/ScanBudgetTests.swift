// A library scan's bytes against the cache limits: the budget gives a
// scan only room free under both its own limit and the whole cache's, a
// scan's shortage presses only the scan budget, and the evictor frees
// scan-only entries first and never a player's entry for a scan's bytes;
// before it evicts any scan-only entry whole, it trims each to its probe
// ranges (head and tail), so the next scan finds what it reads.
import Foundation
import XCTest
@testable import MediaCache
@testable import MediaSources
@testable import MediaSegmented
@testable import MediaStore
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport

final class ScanBudgetTests: XCTestCase {
    private var base = ""
    private var store: CacheStore!
    private var fetcher: FakeFetcher!
    private static let size = 300_000
    private let urls = (0..<4).map { "https://media.example/f\($0).mkv" }

    override func setUpWithError() throws {
        base = try TemporaryDirectory.make("scanbudget")
        store = try CacheStore(root: base)
        fetcher = FakeFetcher()
        for (i, url) in urls.enumerated() { fetcher.add(url, bytes: [UInt8](repeating: UInt8(i + 1), count: Self.size)) }
    }

    override func tearDownWithError() throws {
        fetcher.shutdown()
        try? FileManager.default.removeItem(atPath: base)
    }

    private func makeLoader(_ url: String) -> FileLoader {
        var settings = LoaderSettings()
        settings.timeout = 5
        settings.readClasses = true
        return FileLoader(source: Source(name: url, url: url), store: store, fetcher: fetcher, settings: settings)
    }

    private func fill(_ loader: FileLoader, as readClass: ReadClass) throws {
        var buffer = [UInt8](repeating: 0, count: Self.size)
        let count = try buffer.withUnsafeMutableBytes {
            try loader.read(into: $0, at: 0, pattern: ReadPattern(readClass: readClass))
        }
        XCTAssertEqual(count, Self.size)
        XCTAssertTrue(fetcher.waitUntil { _ in loader.status().state == .idle })
        loader.flush()
    }

    func testAScanTakesOnlyRoomFreeUnderBothLimits_andPressesOnlyItsOwn() {
        let budget = CacheBudget {}
        budget.measured(room: 1_000, since: budget.mark, lowWater: 0, scan: (room: 100, since: budget.scanMark, lowWater: 0))
        XCTAssertEqual(budget.reserve(upTo: 300, for: .scan), 100, "the scan budget's room, not the cache's")
        XCTAssertTrue(budget.isScanPressed)
        XCTAssertFalse(budget.isPressed, "a scan's shortage never makes the evictor free players' bytes")
        XCTAssertFalse(budget.take(1, for: .scan))
        XCTAssertEqual(budget.reserve(upTo: 900, for: .play), 900, "a player's bytes take the rest")
        XCTAssertFalse(budget.isPressed)
        budget.release(50, for: .scan)
        XCTAssertEqual(budget.reserve(upTo: 100, for: .scan), 50)
        // Under the whole cache's room too: a scan never takes a player's room.
        budget.measured(room: 10, since: budget.mark, lowWater: 0, scan: (room: 500, since: budget.scanMark, lowWater: 0))
        XCTAssertEqual(budget.reserve(upTo: 500, for: .scan), 0, "900 + 50 reserved are still committed")
    }

    func testScanOnlyEntriesGoFirstAndAPlayersEntryIsNeverEvictedForAScansBytes() throws {
        let film = makeLoader(urls[0])
        try fill(film, as: .play)
        let scans = urls.dropFirst().map(makeLoader)
        for loader in scans { try fill(loader, as: .scan) }
        // The film is the least recently used: LRU alone would take it first.
        film.lock.withLock { $0.accessed(at: $0.use.lastAccess - 100) }
        XCTAssertFalse(film.usage().isScanOnly)
        XCTAssertTrue(scans.allSatisfy { $0.usage().isScanOnly })

        var limits = CacheLimits()
        limits.minFree = 0
        let allocated = film.usage().allocatedBytes
        limits.maxSize = allocated * 3
        // The scan budget holds one entry: the pass frees the two most
        // recently used scans (a rescan in the same order finds the rest).
        limits.scanMaxSize = allocated + allocated / 2
        var mounted = [urls[0]: film]
        for (url, loader) in zip(urls.dropFirst(), scans) { mounted[url] = loader }
        let report = CacheEvictor(store: store, limits: limits).run(mounted: mounted, now: Int64(time(nil)) + 10)
        XCTAssertTrue(film.status().isComplete, "the player's film was evicted")
        XCTAssertEqual(scans.map { $0.status().cachedBytes > 0 }, [true, false, false])
        XCTAssertEqual(report.evictedEntries, 2)
    }

    func testTheScanBudgetKeepsEveryFilesProbeRangesBeforeEvictingAnyWhole() throws {
        let length = 8 << 20
        let span = Int(FileLoader.probeSpan(length: Int64(length)))
        XCTAssertEqual(span, 2 << 20)
        let names = (0..<3).map { "https://media.example/big\($0).mp4" }
        for (i, url) in names.enumerated() {
            fetcher.add(url, bytes: steppedBytes(0..<length, times: 7, plus: i))
        }
        let loaders = names.map(makeLoader)
        // Each file as a scan reads it: its header, its moov at the end,
        // then a thumbnail's frames in the middle.
        let reads = [0..<(1 << 20), (length - (1 << 20))..<length, (3 << 20)..<(5 << 20)]
        for loader in loaders {
            for range in reads {
                var buffer = [UInt8](repeating: 0, count: range.count)
                let count = try buffer.withUnsafeMutableBytes {
                    try loader.read(into: $0, at: Int64(range.lowerBound), pattern: ReadPattern(readClass: .scan))
                }
                XCTAssertEqual(count, range.count)
            }
            XCTAssertTrue(fetcher.waitUntil { _ in loader.status().state == .idle })
            loader.flush()
            XCTAssertTrue(loader.usage().isScanOnly)
        }
        let probed = Int64(2 << 20)
        let cached = loaders.map { $0.status().cachedBytes }
        XCTAssertTrue(cached.allSatisfy { $0 >= probed + (2 << 20) }, "\(cached)")
        var mounted: [String: FileLoader] = [:]
        for (url, loader) in zip(names, loaders) { mounted[url] = loader }
        var limits = CacheLimits()
        limits.minFree = 0
        limits.maxSize = 1 << 30
        // Room for the three files' probe ranges, not for their middles.
        limits.scanMaxSize = 3 * probed + (1 << 20)
        let report = CacheEvictor(store: store, limits: limits).run(mounted: mounted, now: Int64(time(nil)) + 10)
        XCTAssertEqual(report.evictedEntries, 0, "no file evicted whole while a middle could go")
        for loader in loaders {
            let present = loader.lock.withLock { $0.bytes.present }
            XCTAssertTrue(present.contains(Int64(reads[0].lowerBound)..<Int64(reads[0].upperBound)), "head kept")
            XCTAssertTrue(present.contains(Int64(reads[1].lowerBound)..<Int64(reads[1].upperBound)), "tail kept")
            XCTAssertFalse(present.overlaps(Int64(span)..<Int64(length - span)), "the middle went: \(present)")
        }
        // The probe ranges read back from the cache, byte for byte, with no request.
        let gets = fetcher.gets.count
        var buffer = [UInt8](repeating: 0, count: reads[1].count)
        let count = try buffer.withUnsafeMutableBytes {
            try loaders[0].read(into: $0, at: Int64(reads[1].lowerBound), pattern: ReadPattern(readClass: .scan))
        }
        XCTAssertEqual(count, reads[1].count)
        XCTAssertEqual(buffer, steppedBytes(reads[1], times: 7))
        XCTAssertEqual(fetcher.gets.count, gets)

        // Too little room even for the probe ranges: files go whole, the
        // most recently used first (what an earlier scan left stays).
        loaders[0].lock.withLock { $0.accessed(at: $0.use.lastAccess - 100) }
        limits.scanMaxSize = probed + (1 << 20)
        let second = CacheEvictor(store: store, limits: limits).run(mounted: mounted, now: Int64(time(nil)) + 10)
        XCTAssertEqual(second.evictedEntries, 2)
        XCTAssertEqual(loaders[0].status().cachedBytes, probed, "the least recently used stays")
        XCTAssertEqual(loaders[1].status().cachedBytes + loaders[2].status().cachedBytes, 0)
    }

    func testAScanWithNoRoomUnderAFullCacheEvictsOlderScansNotThePlayers() throws {
        let film = makeLoader(urls[0])
        try fill(film, as: .play)
        let scans = urls.dropFirst().map(makeLoader)
        for loader in scans { try fill(loader, as: .scan) }
        film.lock.withLock { $0.accessed(at: $0.use.lastAccess - 100) }
        scans[0].lock.withLock { $0.accessed(at: $0.use.lastAccess - 50) }
        var mounted = [urls[0]: film]
        for (url, loader) in zip(urls.dropFirst(), scans) { mounted[url] = loader }
        var limits = CacheLimits()
        limits.minFree = 0
        let allocated = film.usage().allocatedBytes
        // The whole cache is full; the scan budget is not.
        limits.maxSize = allocated * 4
        limits.scanMaxSize = allocated * 4
        let evictor = CacheEvictor(store: store, limits: limits)
        let budget = CacheBudget {}
        evictor.run(mounted: mounted, budget: budget, now: Int64(time(nil)) + 10)
        XCTAssertEqual(budget.reserve(upTo: 4096, for: .scan), 0, "no room: the cache is full")
        XCTAssertTrue(budget.isScanPressed)
        let report = evictor.run(mounted: mounted, budget: budget, now: Int64(time(nil)) + 10)
        XCTAssertEqual(report.evictedEntries, 1, "the newest scan's entry made the scan's headroom")
        XCTAssertTrue(film.status().isComplete, "never the player's")
        XCTAssertEqual(scans.map { $0.status().cachedBytes > 0 }, [true, true, false])
        XCTAssertGreaterThan(budget.reserve(upTo: 4096, for: .scan), 0)
    }

    func testAPlayersReadMakesAScansEntryAPlayers() throws {
        let loader = makeLoader(urls[1])
        try fill(loader, as: .scan)
        XCTAssertTrue(loader.usage().isScanOnly)
        var buffer = [UInt8](repeating: 0, count: 4096)
        _ = try buffer.withUnsafeMutableBytes { try loader.read(into: $0, at: 0, pattern: ReadPattern(readClass: .play)) }
        XCTAssertFalse(loader.usage().isScanOnly, "cached bytes a player read are the player's")
        XCTAssertEqual(fetcher.gets.filter { $0.request.url == urls[1] }.count, 1, "read from the cache, not fetched again")
    }

    func testTheClassOutlivesTheMount_andAPlayersReadIsSavedAsAPlayers() throws {
        let scanned = makeLoader(urls[1])
        try fill(scanned, as: .scan)
        let played = makeLoader(urls[2])
        try fill(played, as: .scan)
        var buffer = [UInt8](repeating: 0, count: 4096)
        _ = try buffer.withUnsafeMutableBytes { try played.read(into: $0, at: 0, pattern: ReadPattern(readClass: .play)) }
        played.flush()
        XCTAssertEqual(store.loadMeta(forKey: urls[1])?.scanOnly, true)
        XCTAssertEqual(store.loadMeta(forKey: urls[2])?.scanOnly, false, "the player's read was saved")
        // The next mount: new loaders and records from the same cache.
        XCTAssertTrue(makeLoader(urls[1]).usage().isScanOnly, "still a scan's: evicted first")
        XCTAssertFalse(makeLoader(urls[2]).usage().isScanOnly)
        XCTAssertTrue(EntryRecord(meta: store.loadMeta(forKey: urls[1]), store: store).isScanOnly)
        XCTAssertFalse(EntryRecord(meta: store.loadMeta(forKey: urls[2]), store: store).isScanOnly)
    }

    func testWithoutReadClassesEveryEntryIsAPlayers() throws {
        var settings = LoaderSettings()
        settings.timeout = 5
        let loader = FileLoader(source: Source(name: urls[2], url: urls[2]), store: store, fetcher: fetcher,
                                settings: settings)
        try fill(loader, as: .play)
        XCTAssertFalse(loader.usage().isScanOnly)
    }
}
