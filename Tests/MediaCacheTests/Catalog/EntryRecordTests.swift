// A mounted file as a record until used, and back: stats answered from the
// record with no loader and no disk, idle loaders turned into records and
// made again with the same bytes, and the evictor freeing a record-only
// entry (through a loader, keeping its validators) while loaders are made
// for it (never a wrong byte).
import Foundation
import Synchronization
import XCTest
@testable import MediaCache
@testable import MediaSources
@testable import MediaSegmented
@testable import MediaStore
@testable import MediaNetwork
@testable import MediaSupport
#if canImport(Glibc)
import Glibc
@testable import MediaTestSupport
#endif

final class EntryRecordTests: XCTestCase {
    private var base = ""
    private var store: CacheStore!
    private var fetcher: FakeFetcher!
    private let url = "https://media.example/a.bin"
    private static let size = 1 << 20
    /// No zero byte: a read of a hole in a fresh data file would show.
    /// Made once per process, in place: as a stored property made through
    /// `map` it was made again for every test XCTest creates, listing
    /// included (most of the 12 s `--list-tests` took under ThreadSanitizer).
    private static let content = [UInt8](unsafeUninitializedCapacity: size) { buffer, initialized in
        for i in 0..<size { buffer[i] = UInt8(1 + i % 251) }
        initialized = size
    }
    private var content: [UInt8] { Self.content }

    override func setUpWithError() throws {
        base = try TemporaryDirectory.make("records")
        store = try CacheStore(root: base)
        fetcher = FakeFetcher(chunkSize: 64 << 10)
        fetcher.add(url, bytes: content)
    }

    override func tearDownWithError() throws {
        fetcher.shutdown()
        try? FileManager.default.removeItem(atPath: base)
    }

    private func catalog(limits: CacheLimits? = nil, revalidateAfter: Double? = 60) -> Catalog {
        var settings = LoaderSettings()
        settings.timeout = 10
        return Catalog(sources: [Source(name: "a.bin", url: url)], store: store, fetcher: fetcher, settings: settings,
                       limits: limits, revalidateAfter: revalidateAfter)
    }

    /// Limits that evict every entry not in use at each pass.
    private var evictEverything: CacheLimits {
        var limits = CacheLimits()
        limits.minFree = 0
        limits.maxAgePartial = -1
        limits.maxAgeComplete = -1
        return limits
    }

    private func read(_ catalog: Catalog, at offset: Int, count: Int) throws -> [UInt8] {
        let loader = try catalog.file(at: "/a.bin")
        var buffer = [UInt8](repeating: 0, count: count)
        let n = try buffer.withUnsafeMutableBytes { try loader.read(into: $0, at: Int64(offset), pattern: ReadPattern()) }
        return Array(buffer[..<n])
    }

    /// Reads the whole file through the catalog and waits until its loader is idle.
    private func fill(_ catalog: Catalog) throws {
        XCTAssertTrue(try read(catalog, at: 0, count: Self.size) == content, "wrong bytes")
        let loader = try catalog.file(at: "/a.bin")
        XCTAssertTrue(fetcher.waitUntil { _ in loader.status().state == .idle })
    }

    func testARecord_fitsInFortyEightBytes_andKeepsAnUnknownSizeApartFromZero() {
        // The catalog holds one per mounted file, in a dictionary whose
        // buckets outnumber them: every byte counts 2.6 times at 100,000.
        XCTAssertLessThanOrEqual(MemoryLayout<EntryRecord>.stride, 48)
        var record = EntryRecord(meta: nil, store: store)
        XCTAssertNil(record.size)
        record.size = 0
        XCTAssertEqual(record.size, 0)
        XCTAssertEqual(record.attributes?.size, 0)
        record.size = nil
        XCTAssertNil(record.attributes)
    }

    func testWhatARecordKeeps_tellsWhenAListingMayShowAnotherVersion() {
        let date = "Tue, 01 Oct 2024 10:00:00 GMT"
        var record = EntryRecord(meta: nil, store: store)
        let info = ContentInfo(length: 100, etag: "\"v1\"", lastModified: date)
        XCTAssertFalse(record.mayDiffer(from: info), "a record that knows nothing has nothing stale")
        record.take(info)
        func with(_ change: (inout ContentInfo) -> Void) -> ContentInfo {
            var copy = info
            change(&copy)
            return copy
        }
        XCTAssertFalse(record.mayDiffer(from: info))
        XCTAssertFalse(record.mayDiffer(from: with { $0.etag = "W/\"v1\"" }), "the weak form is the same ETag")
        XCTAssertFalse(record.mayDiffer(from: with { $0.etag = nil }), "a listing without ETags compares dates")
        XCTAssertFalse(record.mayDiffer(from: with { $0.etag = nil; $0.lastModified = nil }))
        XCTAssertFalse(record.mayDiffer(from: with { $0.lastModified = "Tue, 01 Oct 2024 11:00:00 GMT" }),
                       "where both carry an ETag, the ETag decides")
        XCTAssertTrue(record.mayDiffer(from: with { $0.length = 101 }))
        XCTAssertTrue(record.mayDiffer(from: with { $0.etag = "\"v2\"" }))
        XCTAssertTrue(record.mayDiffer(from: with { $0.etag = nil; $0.lastModified = "Tue, 01 Oct 2024 10:00:01 GMT" }))
        XCTAssertTrue(ChangeDetection.listed(with { $0.etag = "\"v2\"" }, against: info) != nil)
        XCTAssertNil(ChangeDetection.listed(with { $0.etag = nil; $0.lastModified = nil }, against: info))
    }

    func testAStatOfAnEntryKnownAtMount_answersFromItsRecord_makingNoLoaderAndReadingNoDisk() throws {
        let first = catalog()
        try fill(first)
        first.flushAll()
        let requests = fetcher.allRecords.count
        let remounted = catalog()
        // Gone from disk after the mount read it: a stat that read it would fail.
        XCTAssertEqual(unlink(store.directory(forKey: url) + "/meta"), 0)
        let attributes = try XCTUnwrap(try remounted.attributes(at: "/a.bin"))
        XCTAssertEqual(attributes.size, Int64(Self.size))
        XCTAssertEqual(attributes.mtime, HTTPDate.seconds("Tue, 01 Oct 2024 10:00:00 GMT"))
        let entry = try XCTUnwrap(remounted.list("/").first)
        XCTAssertNil(entry.loader)
        XCTAssertEqual(entry.knownAttributes?.size, Int64(Self.size))
        XCTAssertTrue(remounted.allLoaders.isEmpty, "a stat or a listing of a known entry made a loader")
        XCTAssertEqual(fetcher.allRecords.count, requests)
        XCTAssertEqual(remounted.cacheUsage().cachedBytes, Int64(Self.size))
    }

    func testAnIdleLoader_becomesARecord_andTheNextOpenReadsTheSameBytesWithoutARequest() throws {
        let c = catalog()
        weak var first: FileLoader?
        try {
            try fill(c)
            first = try c.file(at: "/a.bin")
        }()
        XCTAssertEqual(c.maintenance.flushAndRetire(), 1)
        XCTAssertNil(first, "the loader outlived its retirement")
        XCTAssertTrue(c.allLoaders.isEmpty)
        XCTAssertEqual(c.cacheUsage().entries, 1)
        XCTAssertEqual(c.cacheUsage().cachedBytes, Int64(Self.size))
        let gets = fetcher.gets.count
        XCTAssertTrue(try read(c, at: 0, count: Self.size) == content, "wrong bytes")
        XCTAssertEqual(fetcher.gets.count, gets, "bytes cached before the loader was retired were fetched again")
    }

    func testAListedEntrysProbeAnswer_goesIntoItsRecordWithoutALoader_andIsNeitherLostNorAskedAgain() throws {
        let c = catalog()
        _ = try c.list("/")
        XCTAssertTrue(fetcher.waitUntil { _ in (try? c.list("/").first?.knownAttributes) != nil })
        XCTAssertTrue(c.allLoaders.isEmpty, "a listing's probe made a loader")
        XCTAssertEqual(fetcher.heads.count, 1)
        XCTAssertTrue(fetcher.gets.isEmpty)
        try checkTheUnsavedAnswerIsUsedAndSaved(c)
    }

    func testALoaderProbedByAListing_becomesARecordBeforeItsAnswerIsSaved_andIsNeitherLostNorAskedAgain() throws {
        let c = catalog()
        // A loader of unknown size, which the listing then probes.
        XCTAssertFalse(try c.file(at: "/a.bin").knowsInfo)
        _ = try c.list("/")
        XCTAssertTrue(fetcher.waitUntil { _ in c.allLoaders.first?.knowsInfo == true })
        XCTAssertTrue(fetcher.waitUntil { _ in c.maintenance.flushAndRetire(flushing: false) == 1 })
        try checkTheUnsavedAnswerIsUsedAndSaved(c)
    }

    /// With a probe's answer kept unsaved with the record: a stat answers
    /// from it, a loader made now starts from it without asking again, and
    /// saves it itself.
    private func checkTheUnsavedAnswerIsUsedAndSaved(_ c: Catalog) throws {
        XCTAssertNil(store.loadMeta(forKey: url), "saved already: this test no longer tests the unsaved path")
        XCTAssertEqual(try c.attributes(at: "/a.bin")?.size, Int64(Self.size))
        XCTAssertTrue(c.allLoaders.isEmpty)
        let requests = fetcher.allRecords.count
        XCTAssertEqual(try c.file(at: "/a.bin").contentInfo().length, Int64(Self.size))
        XCTAssertEqual(fetcher.allRecords.count, requests, "the answer was asked again")
        c.flushAll()
        XCTAssertEqual(store.loadMeta(forKey: url)?.info.length, Int64(Self.size))
    }

    func testProbeAnswersKeptWithRecords_areSavedByTheFlusher() throws {
        let c = catalog()
        _ = try c.list("/")
        XCTAssertTrue(fetcher.waitUntil { _ in (try? c.list("/").first?.knownAttributes) != nil })
        XCTAssertNil(store.loadMeta(forKey: url))
        c.maintenance.saveUnsaved(until: .distantFuture)
        // All the answer said, though only its size and date are kept with the record.
        let meta = try XCTUnwrap(store.loadMeta(forKey: url))
        XCTAssertEqual(meta.info, ContentInfo(length: Int64(Self.size), contentType: "video/mp4", etag: "\"v1\"",
                                              lastModified: "Tue, 01 Oct 2024 10:00:00 GMT", acceptsRanges: true))
        XCTAssertTrue(meta.present.isEmpty)
        XCTAssertGreaterThan(meta.lastValidated, 0)
        XCTAssertTrue(c.allLoaders.isEmpty)
    }

    func testALoaderAHandleHolds_staysLive_andTheNextLookupGetsTheSameOne() throws {
        let c = catalog()
        try fill(c)
        let held = try c.file(at: "/a.bin")
        XCTAssertEqual(c.maintenance.flushAndRetire(), 0)
        XCTAssertTrue(try c.file(at: "/a.bin") === held, "two loaders on one cache entry")
    }

    func testARecordOnlyEntry_isEvictedThroughALoader_keepingItsValidatorsAndNoBytes() throws {
        let c = catalog(limits: evictEverything)
        c.maintenance.applyLimits()
        try fill(c)
        XCTAssertEqual(c.maintenance.flushAndRetire(), 1)
        XCTAssertEqual(c.cacheUsage().cachedBytes, Int64(Self.size))
        c.maintenance.applyLimits()
        XCTAssertEqual(c.statistics.snapshot.evictions, 1)
        // Evicted through a loader made for it: the bytes go, the validators stay.
        XCTAssertEqual(store.loadMeta(forKey: url)?.present.isEmpty, true)
        XCTAssertEqual(store.loadMeta(forKey: url)?.info.etag, "\"v1\"")
        XCTAssertEqual(c.cacheUsage().cachedBytes, 0)
        XCTAssertEqual(try c.attributes(at: "/a.bin")?.size, Int64(Self.size), "the size is still known")
        XCTAssertTrue(try read(c, at: 0, count: Self.size) == content, "wrong bytes")
    }

    func testAFileRemovedFromTheMount_asARecord_hasItsEntryEvicted() throws {
        // The evictor learns of a file that left only from the catalog's
        // notes: unnoted, its bytes would stay past every limit.
        let c = catalog(limits: evictEverything)
        c.maintenance.applyLimits()
        try fill(c)
        XCTAssertEqual(c.maintenance.flushAndRetire(), 1)
        try c.remove(name: "a.bin")
        c.maintenance.applyLimits()
        XCTAssertNil(store.loadMeta(forKey: url), "the entry of a file no longer mounted was kept")
        XCTAssertEqual(c.statistics.snapshot.evictions, 1)
    }

    func testAFileRemovedFromTheMount_whileItsLoaderLived_hasItsBytesFreed() throws {
        // Its loader is retired, kept weakly while something uses it; once
        // it is gone the file has left, and the next pass must hear of it.
        let c = catalog(limits: evictEverything)
        c.maintenance.applyLimits()
        try fill(c)
        try c.remove(name: "a.bin")
        c.maintenance.applyLimits()
        XCTAssertEqual(store.loadMeta(forKey: url)?.present.byteCount ?? 0, 0, "bytes of a removed file were kept")
    }

    func testARecordOnlyEntry_evictedWhileTheServerChangedIt_stillSeesTheChangeAtTheNextOpen() throws {
        // Moving the entry to the trash forgot its validators: the next open
        // learned the new version as if new, and the kernel kept serving
        // the old version's pages.
        let c = catalog(limits: evictEverything, revalidateAfter: 0)
        c.maintenance.applyLimits()
        try fill(c)
        XCTAssertEqual(c.maintenance.flushAndRetire(), 1)
        fetcher.update(url) {
            $0.bytes = content.map { $0 ^ 0xFF }
            $0.etag = "\"v2\""
        }
        c.maintenance.applyLimits()
        XCTAssertEqual(c.statistics.snapshot.evictions, 1)
        XCTAssertEqual(c.maintenance.flushAndRetire(), 1)
        XCTAssertTrue(try c.willOpen(c.file(at: "/a.bin")), "the change went unseen: the kernel would serve old pages")
    }

    func testEvictingARecordOnlyEntry_whileLoadersAreMadeForIt_neverReadsWrongBytes() throws {
        let c = catalog(limits: evictEverything)
        c.maintenance.applyLimits()
        let stop = Atomic(false)
        let retiredSoFar = Atomic(0)
        // The flusher's pass, again and again: loaders to records, records evicted.
        let flusher = Background { () -> Int in
            var retired = 0
            while !stop.load(ordering: .relaxed) {
                retired += c.maintenance.flushAndRetire()
                retiredSoFar.store(retired, ordering: .relaxed)
                c.maintenance.applyLimits()
            }
            return retired
        }
        var random = SplitMix64(seed: 11)
        var wrong: [String] = []
        // 300 reads, and more until the flusher both retired and evicted
        // (on a loaded machine it may not have run by then).
        func raced() -> Bool { retiredSoFar.load(ordering: .relaxed) > 0 && c.statistics.snapshot.evictions > 0 }
        var step = 0
        while step < 300 || (!raced() && step < 20_000) {
            defer { step += 1 }
            let offset = Int(random.next() % UInt64(Self.size))
            let count = Int(1 + random.next() % (128 << 10))
            let got = try read(c, at: offset, count: count)
            if got != Array(content[offset..<min(offset + count, Self.size)]) {
                wrong.append("step \(step): \(count) bytes at \(offset)")
            }
        }
        stop.store(true, ordering: .relaxed)
        let retired = try flusher.result()
        XCTAssertEqual(wrong, [])
        XCTAssertGreaterThan(retired, 0, "no loader became a record: the race was not run")
        XCTAssertGreaterThan(c.statistics.snapshot.evictions, 0, "nothing was evicted: the race was not run")
    }

    func testRemovingAndAddingAFile_whileItIsReadAndEvicted_neverReadsWrongBytes() throws {
        // The file leaves and joins the mount again and again, so the
        // evictor's passes see it come and go (its entry read back from
        // disk, evicted, then its own again) while loaders read it.
        let c = catalog(limits: evictEverything)
        c.maintenance.applyLimits()
        let stop = Atomic(false)
        let flusher = Background { () -> Int in
            var passes = 0
            while !stop.load(ordering: .relaxed) {
                c.maintenance.flushAndRetire()
                c.maintenance.applyLimits()
                passes += 1
            }
            return passes
        }
        let url = self.url
        // The churn and the reads take turns by events: the file stays
        // mounted until a read found it since its add (a remove saves the
        // loader's metadata before the add), and a read that found no file
        // waits for the next add.
        let turns = ConditionLocked((adds: 0, found: 0, stopped: false))
        // Only bounds a stalled machine.
        let deadline = Deadline.after(seconds: 60, clock: .system)
        let churn = Background { () -> Int in
            while true {
                try c.remove(name: "a.bin")
                let name = try c.add(url: url)
                guard name == "a.bin" else { throw MediaError.io("added back as \(name)") }
                let foundAtAdd = turns.withLock { turns in
                    turns.adds += 1
                    return turns.found
                }
                turns.broadcast()
                let stopped = turns.withScope { scope in
                    while scope.state.found == foundAtAdd && !scope.state.stopped && scope.wait(until: deadline) {}
                    return scope.state.stopped || deadline.hasPassed
                }
                if stopped { return turns.withLock { $0.adds } }
            }
        }
        var random = SplitMix64(seed: 23)
        var wrong: [String] = []
        var reads = 0
        var step = 0
        // Until it left and came back many times and was evicted, however
        // the threads were scheduled (the deadline only bounds a stalled machine).
        while !deadline.hasPassed
                && (reads < 300 || turns.withLock({ $0.adds }) < 100 || c.statistics.snapshot.evictions < 20) {
            defer { step += 1 }
            let offset = Int(random.next() % UInt64(Self.size))
            let count = Int(1 + random.next() % (64 << 10))
            let addsBefore = turns.withLock { $0.adds }
            let got: [UInt8]
            do {
                got = try read(c, at: offset, count: count)
            } catch let error as MediaError where error.errno == ENOENT {
                // Between a remove and its add: the add is what it waits for.
                turns.withScope { scope in
                    while scope.state.adds == addsBefore && scope.wait(until: deadline) {}
                }
                continue
            }
            reads += 1
            turns.withLock { $0.found += 1 }
            turns.broadcast()
            if got != Array(content[offset..<min(offset + count, Self.size)]) {
                wrong.append("step \(step): \(count) bytes at \(offset)")
            }
        }
        stop.store(true, ordering: .relaxed)
        turns.withLock { $0.stopped = true }
        turns.broadcast()
        XCTAssertGreaterThanOrEqual(try churn.result(), 100, "the file seldom left the mount: the race was not run")
        XCTAssertGreaterThan(try flusher.result(), 0)
        XCTAssertEqual(wrong, [])
        XCTAssertGreaterThanOrEqual(reads, 300, "reads seldom found the file")
        XCTAssertGreaterThanOrEqual(c.statistics.snapshot.evictions, 20, "seldom evicted: the race was not run")
    }
}
