import Foundation
import XCTest
@testable import MediaCache
@testable import MediaSources
@testable import MediaSegmented
@testable import MediaStore
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport

final class CatalogTests: XCTestCase {
    func testNamesVOD_byThePathsExtension_spelledOrEscaped() {
        for url in ["http://a.example/v/index.m3u8", "https://a.example/LIST.M3U?token=1", "http://a.example/t.mpd",
                    "http://a.example/v/index%2Em3u8", "http://a.example/t%2empd"] {
            XCTAssertTrue(Presentation.mayName(url), url)
        }
        for url in ["http://a.example/f.bin", "http://a.example/f.m3u8.bin", "http://a.example/f.mp4?x=.m3u8",
                    "http://a.example/f%20g.mkv", "file:///x.m3u8", "/x.m3u8", "http://a.example/.mpdx"] {
            XCTAssertFalse(Presentation.mayName(url), url)
        }
    }

    private var base = ""
    private var fetcher = FakeFetcher()

    override func setUpWithError() throws {
        base = FileManager.default.temporaryDirectory.appendingPathComponent("mediafs-catalog-\(UUID())").path
        fetcher = FakeFetcher()
    }

    override func tearDownWithError() throws {
        fetcher.shutdown()
        try? FileManager.default.removeItem(atPath: base)
    }

    private func catalog(_ sources: [Source]) throws -> Catalog {
        Catalog(sources: sources, store: try CacheStore(root: base), fetcher: fetcher, settings: LoaderSettings())
    }

    func testNames_duplicatedAcrossSources_getNumberedBeforeTheExtensionInOrder() throws {
        let sources = try Source.parse(arguments: ["https://a.example/a.mp4", "https://b.example/a.mp4",
                                                   "https://c.example/x/a.mp4"], clock: .system)
        XCTAssertEqual(try catalog(sources).names, ["a.mp4", "a (2).mp4", "a (3).mp4"])
    }

    func testTwoNamesForOneURL_shareOneLoader() throws {
        let c = try catalog([Source(name: "one.mp4", url: "https://a.example/v.mp4"),
                             Source(name: "two.mp4", url: "https://a.example/v.mp4")])
        XCTAssertTrue(try c.file(at: "/one.mp4") === c.file(at: "/two.mp4"))
        XCTAssertEqual(c.allLoaders.count, 1)
    }

    func testStats_isOneJSONObjectWithEveryCounter() throws {
        let c = try catalog([Source(name: "a.mp4", url: "https://a.example/a.mp4")])
        let object = try JSONSerialization.jsonObject(with: Data(c.statsJSON().utf8)) as? [String: Any]
        // The disk's free bytes and --cache-min-free are there once limits are measured.
        XCTAssertEqual(Set(object?.keys.map { $0 } ?? []).subtracting(["cache_free_bytes", "cache_min_free"]),
                       ["entries", "cached_bytes", "cache_max_size", "pinned_bytes", "pinned_over_limit", "cache_no_room",
                        "bytes_from_cache", "bytes_from_network", "requests", "transfers_in_flight",
                        "kernel_read_opens", "attribute_requests", "kernel_entry_notifications", "open_handles", "play_bytes_fetched", "scan_bytes_fetched",
                        "play_bytes_served", "scan_bytes_served", "background_bytes_fetched",
                        "background_bytes_served", "grace_resumes", "transfers_yielded",
                        "scan_reads_delayed", "lookahead_requests", "streams_ahead", "limit_passes",
                        "room_waits_unanswered"])
        XCTAssertEqual(object?["entries"] as? Int, 1)
        XCTAssertEqual(object?["pinned_over_limit"] as? Bool, false)
        XCTAssertEqual(object?["open_handles"] as? Int, 0)
    }

    func testStats_countsTheHandlesOpenNow() throws {
        let c = try catalog([Source(name: "a.mp4", url: "https://a.example/a.mp4")])
        func open() throws -> Int? {
            try (JSONSerialization.jsonObject(with: Data(c.statsJSON().utf8)) as? [String: Any])?["open_handles"] as? Int
        }
        let loader = try c.file(at: "/a.mp4")
        let (first, second) = (ReadPattern(), ReadPattern())
        loader.attach(first)
        loader.attach(second)
        XCTAssertEqual(try open(), 2)
        loader.release(first)
        XCTAssertEqual(try open(), 1)
        loader.release(second)
        XCTAssertEqual(try open(), 0)
    }

    // MARK: How an open is served (Catalog.open, without FUSE)

    func testAnOpenThatWouldWrite_isRefusedWithEROFS_beforeAnythingIsAsked() throws {
        let c = try catalog([Source(name: "a.mp4", url: "https://a.example/a.mp4")])
        for flags in [O_WRONLY, O_RDWR, O_RDONLY | O_TRUNC] {
            XCTAssertThrowsError(try c.open("/a.mp4", flags: flags, reader: .player)) {
                XCTAssertEqual(($0 as? MediaError)?.errno, EROFS)
            }
        }
        XCTAssertEqual(fetcher.requestCount, 0, "a refused open sends nothing")
    }

    func testAPlayer_readsThroughThePageCache_aScanner_aroundIt_andTheKernel_whenPassthroughTakesIt() throws {
        fetcher.add("https://a.example/a.mp4", bytes: [1, 2, 3])
        let c = try catalog([Source(name: "a.mp4", url: "https://a.example/a.mp4")])
        let player = try c.open("/a.mp4", flags: O_RDONLY, reader: .player)
        XCTAssertEqual(player.served, .pageCache(keep: true))
        XCTAssertTrue(player.served.kernelReadsAhead)
        let scanner = try c.open("/a.mp4", flags: O_RDONLY, reader: .scanner)
        XCTAssertEqual(scanner.served, .scannerDirect)
        XCTAssertEqual(scanner.pattern.readClass, .scan)
        XCTAssertFalse(scanner.served.kernelReadsAhead)
        var offered: FileLoader?
        let kernel = try c.open("/a.mp4", flags: O_RDONLY, reader: .player) { loader in
            offered = loader
            return true
        }
        XCTAssertEqual(kernel.served, .kernelReads)
        XCTAssertTrue(offered === player.loader, "passthrough is offered the file's one loader")
        XCTAssertEqual(c.statistics.snapshot.kernelReadOpens, 1)
        XCTAssertEqual(player.loader.openHandles, 3)
        for opened in [player, scanner, kernel] { opened.loader.release(opened.pattern) }
    }

    func testAnOpenOfAChangedFile_goesAroundThePageCacheAnOlderHandleStillReads() throws {
        let url = "https://a.example/a.mp4"
        fetcher.add(url, bytes: [1, 2, 3])
        let c = Catalog(sources: [Source(name: "a.mp4", url: url)], store: try CacheStore(root: base),
                        fetcher: fetcher, settings: LoaderSettings(), revalidateAfter: 0)
        let before = try c.open("/a.mp4", flags: O_RDONLY, reader: .player)
        XCTAssertEqual(before.served, .pageCache(keep: true))
        fetcher.update(url) { $0.bytes = [4, 5, 6, 7]; $0.etag = "\"v2\"" }
        let after = try c.open("/a.mp4", flags: O_RDONLY, reader: .player)
        XCTAssertEqual(after.served, .aroundPageCache, "a page of the old version is still read")
        XCTAssertTrue(after.served.directIO)
        XCTAssertEqual(try c.attributes(at: "/a.mp4")?.size, 4)
        for opened in [before, after] { opened.loader.release(opened.pattern) }
    }

    func testAdd_thenRemove_changesTheRootAndKeepsOtherNames() throws {
        let c = try catalog([Source(name: "a.mp4", url: "https://a.example/a.mp4")])
        XCTAssertEqual(try c.add(url: "https://a.example/b%20c.mkv"), "b c.mkv")
        XCTAssertEqual(c.names, ["a.mp4", "b c.mkv"])
        try c.remove(name: "a.mp4")
        XCTAssertEqual(c.names, ["b c.mkv"])
        XCTAssertThrowsError(try c.file(at: "/a.mp4")) { XCTAssertEqual(($0 as? MediaError)?.errno, ENOENT) }
        XCTAssertThrowsError(try c.remove(name: "nope")) { XCTAssertEqual(($0 as? MediaError)?.errno, ENOENT) }
    }

    func testListing_probesItsEntriesAtBackgroundPriority_andAStatStillGetsItsAnswer() throws {
        // Probes sent at read priority bypass the background cap: 10,000
        // of them once sat in libcurl at the same time.
        let urls = (0..<4).map { "https://a.example/\($0).bin" }
        for url in urls { fetcher.add(url, bytes: [1, 2, 3]) }
        fetcher.hold()
        let c = try catalog(urls.enumerated().map { Source(name: "\($0.offset).bin", url: $0.element) })
        _ = try c.list("/")
        XCTAssertTrue(fetcher.waitUntil { $0.heads.count == urls.count })
        XCTAssertEqual(Set(fetcher.heads.map(\.priority)), [.probe], "\(fetcher.heads.map(\.priority))")
        // A stat made while the probes are held waits for its answer.
        let stat = Background { try c.attributes(at: "/2.bin") }
        fetcher.release()
        let attributes = try stat.result()
        XCTAssertEqual(attributes?.size, 3)
        XCTAssertEqual(attributes?.mtime, 1_727_776_800, "the server's Last-Modified")
    }

    func testProbeFeeder_keepsABoundedNumberOfProbesOut_andProbesEveryEntryOnce() throws {
        // Queueing a listing's 100,000 probes at once held a transfer each.
        let store = try CacheStore(root: base)
        let urls = (0..<40).map { "https://a.example/\($0).bin" }
        for url in urls { fetcher.add(url, bytes: [1, 2, 3]) }
        fetcher.setChunkDelay(0.002)
        let loaders = urls.map { FileLoader(source: Source(name: $0, url: $0), store: store, fetcher: fetcher,
                                            settings: LoaderSettings()) }
        let byURL = Dictionary(uniqueKeysWithValues: zip(urls, loaders))
        let feeder = ProbeFeeder(outstanding: 4)
        feeder.starting { url, settled in byURL[url]!.prefetchInfo(then: settled) }
        feeder.add(urls + urls)
        var most = 0
        XCTAssertTrue(fetcher.waitUntil { fetcher in
            // Probes asked for whose answer is not in yet (read in this
            // order, it may count low, never high).
            let asked = fetcher.heads.count
            most = max(most, asked - loaders.filter(\.knowsInfo).count)
            return loaders.allSatisfy(\.knowsInfo) && feeder.waiting == 0
        })
        XCTAssertLessThanOrEqual(most, 4)
        XCTAssertEqual(fetcher.heads.count, urls.count, "an entry listed twice was probed twice")
    }

    func testProbeFeeder_tellsOnceWhenItsLastProbeSettled() throws {
        // The flusher gives back what a listing's probes took when told the
        // feeder drained: a lost call would leave it held until the next
        // listing. The probes
        // here are the test's own: each settles when the test says so;
        // the last entry is known already (its start returns false), and
        // one at a time it is taken after the last probe settled.
        let feeder = ProbeFeeder(outstanding: 1)
        let state = Locked((settles: [@Sendable () -> Void](), drained: 0))
        feeder.starting(with: { url, settled in
            guard url != "known" else { return false }
            state.withLock { $0.settles.append(settled) }
            return true
        }, whenDrained: { state.withLock { $0.drained += 1 } })
        feeder.add((0..<9).map { "\($0)" } + ["known"])
        var settledCount = 0
        while let next = state.withLock({ $0.settles.isEmpty ? nil : $0.settles.removeFirst() }) {
            XCTAssertEqual(state.withLock { $0.drained }, 0, "told before probe \(settledCount) settled")
            next()
            settledCount += 1
        }
        XCTAssertEqual(settledCount, 9)
        XCTAssertEqual(state.withLock { $0.drained }, 1)
        XCTAssertTrue(feeder.takeDrained())
    }

    func testProbeFeeder_settledWithoutWaiting_keepsWhatFoundTheLockTaken() throws {
        // The network thread starts the next probes itself when the
        // catalog's lock is free; a start that finds it taken (nil) must
        // keep its URL for the pump that runs elsewhere, neither skip it
        // nor lose it, and the drain is told once, at the very end.
        let feeder = ProbeFeeder(outstanding: 2)
        let state = Locked((settles: [@Sendable () -> Void](), started: [String](), busy: true, drained: 0))
        let start: ProbeFeeder.Start = { url, settled in
            state.withLock { $0.started.append(url); $0.settles.append(settled) }
            return true
        }
        feeder.starting(with: start, withoutWaiting: { url, settled in
            if state.withLock({ $0.busy }) { return nil }
            return start(url, settled)
        }, whenDrained: { state.withLock { $0.drained += 1 } })
        feeder.add((0..<6).map { "\($0)" })
        XCTAssertEqual(state.withLock { $0.started }, ["0", "1"])
        // One settles where the lock is taken: "2" waits, held.
        _ = state.withLock { $0.settles.removeFirst() }
        XCTAssertFalse(feeder.settledWithoutWaiting())
        XCTAssertEqual(feeder.waiting, 4)
        XCTAssertEqual(state.withLock { $0.started }, ["0", "1"])
        // The pump elsewhere starts the held one first.
        feeder.pump()
        XCTAssertEqual(state.withLock { $0.started }, ["0", "1", "2"])
        // The lock free: the next ones start without waiting, in order.
        state.withLock { $0.busy = false }
        while state.withLock({ !$0.settles.isEmpty }) {
            _ = state.withLock { $0.settles.removeFirst() }
            XCTAssertTrue(feeder.settledWithoutWaiting())
        }
        XCTAssertEqual(state.withLock { $0.started }, (0..<6).map { "\($0)" })
        XCTAssertEqual(state.withLock { $0.drained }, 1)
        XCTAssertEqual(feeder.waiting, 0)
    }

    func testAListingsAnswers_areSavedByStop_inTheJournal() throws {
        let urls = (0..<50).map { "https://a.example/\($0).bin" }
        for url in urls { fetcher.add(url, bytes: [1, 2, 3]) }
        let c = try catalog(urls.enumerated().map { Source(name: "\($0.offset).bin", url: $0.element) })
        c.start()
        _ = try c.list("/")
        XCTAssertTrue(fetcher.waitUntil { _ in (try? c.list("/").allSatisfy { $0.knownAttributes != nil }) == true })
        c.stop()
        let store = try CacheStore(root: base)
        store.openAnswers(now: Clock.system.wall())
        XCTAssertEqual(urls.filter { store.loadMeta(forKey: $0)?.info.length != 3 }, [])
        // One file, not an entry directory each (two new inodes, 300 µs).
        XCTAssertEqual(store.entries().count, 0)
        XCTAssertEqual(store.answers.count, urls.count)
    }

    func testStattingEveryEntryOfAListing_makesNoLoader_andSendsOneHEADAnEntry() throws {
        // `ls -l` of 100,000 listed files made a loader each (100 MiB).
        let urls = (0..<300).map { "https://a.example/\($0).bin" }
        for (index, url) in urls.enumerated() { fetcher.add(url, bytes: [UInt8](repeating: 7, count: index + 1)) }
        let c = try catalog(urls.enumerated().map { Source(name: "\($0.offset).bin", url: $0.element) })
        _ = try c.list("/")
        // The last first: it overtakes its background probe, or finds it done.
        for index in urls.indices.reversed() {
            XCTAssertEqual(try c.attributes(at: "/\(index).bin")?.size, Int64(index + 1))
        }
        XCTAssertTrue(c.allLoaders.isEmpty, "\(c.allLoaders.count) loaders made")
        XCTAssertTrue(fetcher.gets.isEmpty, "a stat of a listed entry sent a GET")
        XCTAssertTrue(fetcher.waitUntil { $0.heads.count == urls.count })
        XCTAssertEqual(Set(fetcher.heads.map(\.request.url)).count, urls.count, "an entry was probed twice")
        XCTAssertEqual(try c.list("/").filter { $0.knownAttributes == nil }.map(\.name), [])
    }

    func testAListedEntryThatFailsItsProbe_failsItsStats_withoutAskingAgainEachTime() throws {
        let missing = "https://a.example/gone.bin"
        fetcher.add("https://a.example/here.bin", bytes: [1, 2])
        let c = try catalog([Source(name: "gone.bin", url: missing), Source(name: "here.bin", url: "https://a.example/here.bin")])
        _ = try c.list("/")
        XCTAssertTrue(fetcher.waitUntil { $0.allRecords.filter { $0.status != 0 }.count == 2 })
        for _ in 0..<3 {
            XCTAssertThrowsError(try c.attributes(at: "/gone.bin")) {
                XCTAssertEqual(($0 as? MediaError)?.errno, ENOENT, "\($0)")
            }
        }
        XCTAssertEqual(fetcher.allRecords.filter { $0.request.url == missing }.count, 1,
                       "\(fetcher.allRecords.filter { $0.request.url == missing }.map(\.method))")
        XCTAssertEqual(try c.attributes(at: "/here.bin")?.size, 2)
    }

    func testAdd_ofABadURL_isRefusedWithAMessage() throws {
        let c = try catalog([])
        XCTAssertThrowsError(try c.add(url: "gopher://a.example/x")) {
            XCTAssertTrue(($0 as? MediaError)?.message.contains("unsupported scheme") ?? false)
        }
    }

    func testPaths_throughAFile_areNotDirectories() throws {
        let c = try catalog([Source(name: "a.mp4", url: "https://a.example/a.mp4")])
        XCTAssertThrowsError(try c.node(at: "/a.mp4/x")) { XCTAssertEqual(($0 as? MediaError)?.errno, ENOTDIR) }
        XCTAssertThrowsError(try c.node(at: "/missing")) { XCTAssertEqual(($0 as? MediaError)?.errno, ENOENT) }
        guard case .directory = try c.node(at: "/") else { return XCTFail("root is a directory") }
    }
}
