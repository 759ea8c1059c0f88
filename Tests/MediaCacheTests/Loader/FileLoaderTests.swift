// FileLoader driven the way the kernel drives it: reads from several threads,
// one ReadPattern per open handle, release on close, against a FakeFetcher
// that counts requests. Only generous timeouts guard against hangs; no test
// asserts how long anything took.
import Foundation
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

final class FileLoaderTests: XCTestCase {
    private var base = ""
    private var store: CacheStore!
    private var fetcher: FakeFetcher!
    private var fetchers: [FakeFetcher] = []
    private let url = "https://media.example/films/video.mp4"

    override func setUpWithError() throws {
        base = try TemporaryDirectory.make("loader")
        store = try CacheStore(root: base)
        fetcher = makeFetcher()
    }

    override func tearDownWithError() throws {
        for fetcher in fetchers { fetcher.shutdown() }
        try? FileManager.default.removeItem(atPath: base)
    }

    // MARK: Helpers

    private func makeFetcher(chunkSize: Int64 = 64 << 10) -> FakeFetcher {
        let made = FakeFetcher(chunkSize: chunkSize)
        fetchers.append(made)
        return made
    }

    /// These tests pin the exact ranges each read asks for, after a HEAD
    /// probe; the round-trip savers (a ranged GET probe, the stretch to the
    /// end, the link's window) have their own tests in RoundTripTests.
    private var settings: LoaderSettings {
        var settings = LoaderSettings()
        settings.timeout = 5
        settings.probeFirstBytes = 0
        settings.tailStretch = 0
        settings.link = nil
        return settings
    }

    private func makeLoader(fetcher: FakeFetcher? = nil, settings: LoaderSettings? = nil) -> FileLoader {
        FileLoader(source: Source(name: "video.mp4", url: url), store: store, fetcher: fetcher ?? self.fetcher,
                   settings: settings ?? self.settings)
    }

    /// Bytes that differ from their neighbours at every offset, so a byte
    /// landing in the wrong place shows.
    private static func content(count: Int, seed: UInt64 = 1) -> [UInt8] {
        var random = SplitMix64(seed: seed)
        var bytes = [UInt8](repeating: 0, count: count)
        var i = 0
        while i < count {
            var word = random.next()
            for _ in 0..<8 where i < count {
                bytes[i] = UInt8(truncatingIfNeeded: word)
                word >>= 8
                i += 1
            }
        }
        return bytes
    }

    private func addContent(count: Int) -> [UInt8] {
        let bytes = Self.content(count: count)
        fetcher.add(url, bytes: bytes)
        return bytes
    }

    private static func expected(_ source: [UInt8], _ offset: Int64, _ count: Int) -> [UInt8] {
        let start = min(Int(offset), source.count)
        return Array(source[start..<min(start + count, source.count)])
    }

    private static let kib: Int64 = 1 << 10
    private static let mib: Int64 = 1 << 20

    private func sum(_ ranges: [Range<Int64>?]) -> Int64 {
        ranges.reduce(0) { $0 + Int64($1?.count ?? 0) }
    }

    // MARK: Cold, warm and remounted reads

    func testALoaderThatCannotReadItsMetadataNow_passesReadsUncached_andLeavesTheEntryAsItWas() throws {
        // Out of descriptors when a loader was made, it took the entry for
        // new: its saves replaced metadata claiming bytes it then wrote
        // over, so a crash could pair the old claims with another
        // version's bytes.
        let old = Self.content(count: 256 << 10, seed: 1)
        fetcher.add(url, bytes: old)
        let first = makeLoader()
        var buffer = [UInt8](repeating: 0, count: old.count)
        XCTAssertEqual(try buffer.withUnsafeMutableBytes { try first.read(into: $0, at: 0, pattern: ReadPattern()) },
                       old.count)
        XCTAssertTrue(fetcher.waitUntil { _ in first.status().state == .idle })
        first.flush()
        let saved = try XCTUnwrap(store.loadMeta(forKey: url))
        XCTAssertEqual(saved.present.byteCount, Int64(old.count))
        let new = Self.content(count: 256 << 10, seed: 2)
        fetcher.update(url) {
            $0.bytes = new
            $0.etag = "\"v2\""
        }
        // Every open fails with EMFILE while the loader reads its metadata.
        var limit = rlimit()
        XCTAssertEqual(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit), 0)
        var low = limit
        low.rlim_cur = 3
        XCTAssertEqual(setrlimit(Int32(RLIMIT_NOFILE.rawValue), &low), 0)
        let blind = makeLoader()
        XCTAssertEqual(setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit), 0)
        XCTAssertTrue(blind.cacheUnusable)
        XCTAssertEqual(try buffer.withUnsafeMutableBytes { try blind.read(into: $0, at: 0, pattern: ReadPattern()) },
                       new.count)
        XCTAssertTrue(buffer == new, "wrong bytes")
        XCTAssertTrue(fetcher.waitUntil { _ in blind.status().state == .idle })
        blind.flush()
        XCTAssertEqual(store.loadMeta(forKey: url), saved, "the metadata was replaced")
        let data = try XCTUnwrap(FileManager.default.contents(atPath: store.directory(forKey: url) + "/data"))
        XCTAssertTrue([UInt8](data) == old, "the cached bytes were written over")
    }

    func testRead_ofColdRange_returnsExactBytes() throws {
        let source = addContent(count: 1 << 20)
        let loader = makeLoader()
        XCTAssertEqual(try read(loader, at: 1000, count: 5000), Self.expected(source, 1000, 5000))
        XCTAssertEqual(fetcher.gets.map(\.range), [1000..<6000])
    }

    func testRead_ofSameRangeTwice_sendsNoSecondRequest() throws {
        let source = addContent(count: 1 << 20)
        let loader = makeLoader()
        _ = try read(loader, at: 4096, count: 65536)
        let before = fetcher.requestCount
        XCTAssertEqual(try read(loader, at: 4096, count: 65536), Self.expected(source, 4096, 65536))
        XCTAssertEqual(try read(loader, at: 8192, count: 1000), Self.expected(source, 8192, 1000))
        XCTAssertEqual(fetcher.requestCount, before)
    }

    func testRemount_afterFlush_readsCachedRangeAndContentInfoWithNoRequests() throws {
        let source = addContent(count: 1 << 20)
        let first = makeLoader()
        let firstInfo = try first.contentInfo()
        _ = try read(first, at: 100_000, count: 200_000)
        first.flush()

        let offline = makeFetcher()
        let second = makeLoader(fetcher: offline)
        XCTAssertEqual(try second.contentInfo(), firstInfo)
        XCTAssertEqual(firstInfo.length, 1 << 20)
        XCTAssertEqual(firstInfo.etag, "\"v1\"")
        XCTAssertEqual(firstInfo.contentType, "video/mp4")
        XCTAssertEqual(try read(second, at: 100_000, count: 200_000), Self.expected(source, 100_000, 200_000))
        XCTAssertEqual(try read(second, at: 150_000, count: 10), Self.expected(source, 150_000, 10))
        XCTAssertEqual(offline.requestCount, 0)
    }

    func testRemount_withoutFlush_forgetsBytesRatherThanInventingThem() throws {
        let source = addContent(count: 1 << 20)
        let first = makeLoader()
        _ = try first.contentInfo()
        first.flush()
        _ = try read(first, at: 0, count: 4096)

        let second = makeLoader()
        let before = fetcher.gets.count
        XCTAssertEqual(try read(second, at: 0, count: 4096), Self.expected(source, 0, 4096))
        XCTAssertEqual(fetcher.gets.count, before + 1)
    }

    // MARK: Joining and holes

    func testTwoConcurrentReaders_ofSameColdRange_causeOneGet() throws {
        let source = addContent(count: 2 << 20)
        let loader = makeLoader()
        _ = try loader.contentInfo()
        fetcher.hold()
        let a = Background { try Self.read(loader, at: 0, count: 256 << 10) }
        XCTAssertTrue(fetcher.waitUntil { $0.transfersWaitingAtHold.count == 1 })
        let b = Background { try Self.read(loader, at: 64 << 10, count: 128 << 10) }
        XCTAssertTrue(eventually { loader.waitingReads == 2 }, "b never waited for bytes")
        fetcher.release()
        XCTAssertEqual(try a.result(), Self.expected(source, 0, 256 << 10))
        XCTAssertEqual(try b.result(), Self.expected(source, 64 << 10, 128 << 10))
        XCTAssertEqual(fetcher.gets.count, 1)
        XCTAssertEqual(fetcher.gets.first?.range, 0..<(256 << 10))
    }

    /// A read that waits long says why at debug level: the transfer it
    /// counts on and where that is, or that none covers its bytes.
    func testASlowWaitsReason_namesTheTransferItCountsOn() throws {
        let source = addContent(count: 1 << 20)
        let loader = makeLoader()
        _ = try loader.contentInfo()
        fetcher.hold()
        let reading = Background { try Self.read(loader, at: 0, count: 64 << 10) }
        XCTAssertTrue(fetcher.waitUntil { $0.transfersWaitingAtHold.count == 1 })
        let (waiting, uncovered) = loader.lock.withLock { state in
            (loader.slowWaitReason(for: 0..<(64 << 10), missing: [0..<(64 << 10)], since: loader.now() - 2, in: state),
             loader.slowWaitReason(for: (512 << 10)..<(576 << 10), missing: [(512 << 10)..<(576 << 10)],
                                   since: loader.now(), in: state))
        }
        XCTAssertTrue(waiting.hasPrefix("read 0-65535 of \(url) has waited 2.0 s: transfer "), waiting)
        XCTAssertTrue(waiting.contains("at byte 0 of 0-"), waiting)
        XCTAssertTrue(uncovered.contains("no transfer covers byte 524288"), uncovered)
        fetcher.release()
        XCTAssertEqual(try reading.result(), Self.expected(source, 0, 64 << 10))
    }

    /// The network thread only writes: made as the first bytes came, the
    /// entry's directory cost it a mkdir and an fsync of the parent, and
    /// every other transfer waited. The reader's thread makes it first.
    func testAReadsEntryDirectory_isMadeBeforeItsTransferBrings_anyByte() throws {
        let source = addContent(count: 1 << 20)
        let loader = makeLoader()
        _ = try loader.contentInfo()
        fetcher.hold()
        let reading = Background { try Self.read(loader, at: 0, count: 64 << 10) }
        XCTAssertTrue(fetcher.waitUntil { $0.transfersWaitingAtHold.count == 1 })
        var info = stat()
        XCTAssertEqual(stat(store.directory(forKey: url), &info), 0,
                       "no entry directory while the transfer's first bytes wait: the network thread would make it")
        fetcher.release()
        XCTAssertEqual(try reading.result(), Self.expected(source, 0, 64 << 10))
    }

    func testRead_straddlingPresentAndMissingBytes_requestsOnlyTheHole() throws {
        let source = addContent(count: 1 << 20)
        let loader = makeLoader()
        _ = try read(loader, at: 0, count: 64 << 10)
        _ = try read(loader, at: 128 << 10, count: 64 << 10)
        XCTAssertEqual(try read(loader, at: 32 << 10, count: 192 << 10), Self.expected(source, 32 << 10, 192 << 10))
        XCTAssertEqual(fetcher.gets.map(\.range), [0..<(64 << 10), (128 << 10)..<(192 << 10),
                                                  (64 << 10)..<(128 << 10), (192 << 10)..<(224 << 10)])
    }

    // MARK: Readahead, seeks and close

    func testSequentialReads_earnReadaheadLargerThanTheReads_withoutFetchingAnyByteTwice() throws {
        // Readahead starts after ReadPattern.streakBeforeReadahead (4 MiB).
        let length = 32 << 20
        // A server slower than the reader, so reads find their handle's
        // transfer still running: that is when readahead tops up.
        fetcher.setChunkDelay(0.005)
        let source = addContent(count: length)
        let loader = makeLoader()
        let pattern = ReadPattern()
        var offset: Int64 = 0
        while offset < Int64(length) {
            XCTAssertEqual(try read(loader, at: offset, count: 128 << 10, pattern: pattern),
                           Self.expected(source, offset, 128 << 10), "at \(offset)")
            offset += 128 << 10
        }
        let gets = fetcher.gets
        XCTAssertTrue(gets.contains { $0.priority == .readahead && ($0.range?.count ?? 0) > 128 << 10 },
                      "\(gets.map { ($0.range!, $0.priority) })")
        XCTAssertLessThan(gets.count, length / (128 << 10) / 2, "readahead should merge reads into fewer GETs")
        XCTAssertLessThanOrEqual(sum(gets.map(\.range)), Int64(length))
        let sorted = gets.compactMap(\.range).sorted { $0.lowerBound < $1.lowerBound }
        for (a, b) in zip(sorted, sorted.dropFirst()) {
            XCTAssertLessThanOrEqual(a.upperBound, b.lowerBound, "\(a) and \(b) overlap")
        }
    }

    func testSmallReadsNearTheEnd_doNotStreamTheWholeFile() throws {
        let length: Int64 = 64 << 20
        let source = addContent(count: Int(length))
        let loader = makeLoader()
        let pattern = ReadPattern()
        _ = try read(loader, at: 0, count: 4096, pattern: pattern)
        XCTAssertEqual(try read(loader, at: length - 100_000, count: 16384, pattern: pattern),
                       Self.expected(source, length - 100_000, 16384))
        XCTAssertLessThanOrEqual(sum(fetcher.gets.map(\.range)), 4096 + 16384)
    }

    /// Sequential reads on `pattern` past the 4 MiB streak that earns
    /// readahead, until a readahead transfer stops at a hold over
    /// 6 MiB..<12 MiB, leaving a large part of its range unsent.
    private func growReadahead(_ loader: FileLoader, pattern: ReadPattern, source: [UInt8]) throws {
        fetcher.hold((6 << 20)..<(12 << 20))
        var offset: Int64 = 0
        for _ in 0..<48 {
            XCTAssertEqual(try read(loader, at: offset, count: 128 << 10, pattern: pattern),
                           Self.expected(source, offset, 128 << 10))
            offset += 128 << 10
        }
        XCTAssertTrue(fetcher.waitUntil { !$0.transfersWaitingAtHold.isEmpty })
    }

    func testFarSeek_cancelsTheTransferTheOldPositionStarted() throws {
        let source = addContent(count: 16 << 20)
        let loader = makeLoader()
        let pattern = ReadPattern()
        try growReadahead(loader, pattern: pattern, source: source)
        let held = fetcher.transfersWaitingAtHold
        XCTAssertEqual(try read(loader, at: 14 << 20, count: 128 << 10, pattern: pattern),
                       Self.expected(source, 14 << 20, 128 << 10))
        XCTAssertFalse(held.isDisjoint(with: fetcher.cancelled), "held \(held), cancelled \(fetcher.cancelled)")
        XCTAssertTrue(fetcher.waitUntil { f in held.allSatisfy { f.record($0)!.finished } })
        for id in held.intersection(fetcher.cancelled) {
            let record = fetcher.record(id)!
            XCTAssertLessThan(record.delivered, Int64(record.body.count))
            XCTAssertEqual(record.completion?.errno, ECANCELED)
        }
    }

    /// Bytes a transfer hands over after its reader's seek stopped it, before
    /// the stop reached the network thread, are the file's: kept, so the
    /// next read of them asks the server for nothing (seen as bytes sent
    /// twice in a stress run of test_readpath).
    func testFarSeek_keepsTheBytesThatArriveBeforeTheStopLands() throws {
        let source = addContent(count: 16 << 20)
        let loader = makeLoader()
        let pattern = ReadPattern()
        try growReadahead(loader, pattern: pattern, source: source)
        let held = fetcher.transfersWaitingAtHold
        fetcher.setLateChunks(2)
        _ = try read(loader, at: 14 << 20, count: 128 << 10, pattern: pattern)
        XCTAssertTrue(fetcher.waitUntil { f in held.allSatisfy { f.record($0)!.finished } })
        let stopped = held.intersection(fetcher.cancelled).map { fetcher.record($0)! }
        XCTAssertFalse(stopped.isEmpty, "held \(held), cancelled \(fetcher.cancelled)")
        fetcher.release()
        let requests = fetcher.requestCount
        for record in stopped {
            let late = 2 * fetcher.chunkSize
            XCTAssertGreaterThanOrEqual(record.delivered, late)
            let from = (record.body.lowerBound + record.delivered - late)
            XCTAssertEqual(try read(loader, at: from, count: Int(late), pattern: ReadPattern()),
                           Self.expected(source, from, Int(late)))
        }
        XCTAssertEqual(fetcher.requestCount, requests, "bytes handed over after the stop were fetched again")
    }

    /// Each handle's reads, and the bytes of the transfers they start,
    /// count in its reader's account; a cached byte read again is read,
    /// not fetched.
    func testReadsAndTheirFetches_countInTheReadersAccount() throws {
        let source = addContent(count: 16 << 20)
        let loader = makeLoader()
        let book = ReaderBook()
        let process = { (pid: Int32) in ReaderProcess(pid: pid, startTime: 1, name: "r\(pid)", arguments: "", parentName: "") }
        let a = ReadPattern(.player, account: book.opened(by: process(1), as: .play, file: "/v"))
        let b = ReadPattern(.scanner, account: book.opened(by: process(2), as: .scan, file: "/v"))
        loader.attach(a)
        loader.attach(b, throughPageCache: false)
        XCTAssertEqual(try read(loader, at: 4 << 20, count: 100_000, pattern: a), Self.expected(source, 4 << 20, 100_000))
        XCTAssertEqual(try read(loader, at: 12 << 20, count: 5_000, pattern: b), Self.expected(source, 12 << 20, 5_000))
        XCTAssertEqual(try read(loader, at: 4 << 20, count: 1_000, pattern: b), Self.expected(source, 4 << 20, 1_000))
        XCTAssertTrue(fetcher.waitUntil { $0.gets.allSatisfy(\.finished) })
        func delivered(_ range: Range<Int64>) -> Int64 {
            fetcher.gets.filter { range.contains($0.range!.lowerBound) }.reduce(0) { $0 + $1.delivered }
        }
        XCTAssertEqual(a.account?.bytesRead, 100_000)
        XCTAssertEqual(b.account?.bytesRead, 6_000)
        XCTAssertEqual(a.account?.bytesFetched, delivered((4 << 20)..<(8 << 20)))
        XCTAssertEqual(b.account?.bytesFetched, delivered((12 << 20)..<(16 << 20)), "b's read of a's bytes fetched nothing")
        XCTAssertGreaterThanOrEqual(a.account!.bytesFetched, 100_000)
        XCTAssertGreaterThanOrEqual(b.account!.bytesFetched, 5_000)
        // Another process reading a's handle (a shared descriptor): its
        // bytes count in its own account; what a's handle fetches for it
        // stays a's.
        let child = book.opened(by: process(3), as: .play, file: "/v")
        let fetchedBefore = a.account!.bytesFetched
        var buffer = [UInt8](repeating: 0, count: 7_000)
        let n = try buffer.withUnsafeMutableBytes {
            try loader.read(into: $0, at: 8 << 20, pattern: a, account: child)
        }
        XCTAssertEqual(Array(buffer[..<n]), Self.expected(source, 8 << 20, 7_000))
        XCTAssertTrue(fetcher.waitUntil { $0.gets.allSatisfy(\.finished) })
        XCTAssertEqual(child.bytesRead, 7_000)
        XCTAssertEqual(a.account?.bytesRead, 100_000, "the opener's count did not grow")
        XCTAssertEqual(child.bytesFetched, 0)
        XCTAssertGreaterThanOrEqual(a.account!.bytesFetched, fetchedBefore)
        loader.release(a)
        loader.release(b)
    }

    /// `--background-daily`: a background job's read is admitted only if
    /// its bytes fit beside today's; one that does not fails at once (EIO,
    /// no request), its read of cached bytes and a player's read of
    /// anything are served; only its bytes are charged, never past the cap.
    func testABackgroundJobPastItsDailyBytes_isServedOnlyWhatIsCached() throws {
        let source = addContent(count: 4 << 20)
        var settings = self.settings
        let allowance = BackgroundAllowance(bytesPerDay: 300_000, store: nil)
        settings.backgroundDaily = allowance
        let loader = makeLoader(settings: settings)
        let player = ReadPattern(readClass: .play)
        let job = ReadPattern(readClass: .background)
        XCTAssertEqual(try read(loader, at: 0, count: 100_000, pattern: player), Self.expected(source, 0, 100_000))
        XCTAssertEqual(allowance.usedToday, 0, "a player's bytes are not charged")
        XCTAssertEqual(try read(loader, at: 1 << 20, count: 250_000, pattern: job), Self.expected(source, 1 << 20, 250_000))
        XCTAssertTrue(fetcher.waitUntil { $0.gets.allSatisfy(\.finished) })
        XCTAssertEqual(allowance.usedToday, 250_000)
        XCTAssertFalse(allowance.exhausted)
        let requests = fetcher.requestCount
        XCTAssertThrowsError(try read(loader, at: 3 << 20, count: 100_000, pattern: job), "50,000 B left, 100,000 asked") {
            XCTAssertEqual(($0 as? MediaError)?.errno, EIO)
        }
        XCTAssertEqual(fetcher.requestCount, requests, "refused without a request")
        XCTAssertEqual(try read(loader, at: 3 << 20, count: 40_000, pattern: job), Self.expected(source, 3 << 20, 40_000),
                       "a read that fits is served")
        XCTAssertTrue(fetcher.waitUntil { $0.gets.allSatisfy(\.finished) })
        XCTAssertEqual(allowance.usedToday, 290_000, "charged what arrived, never past the cap")
        XCTAssertEqual(try read(loader, at: 1 << 20, count: 4096, pattern: job), Self.expected(source, 1 << 20, 4096),
                       "cached bytes are still served")
        XCTAssertEqual(try read(loader, at: 2 << 20, count: 4096, pattern: player), Self.expected(source, 2 << 20, 4096),
                       "a player is never limited")
    }

    /// Its refusal comes at once: not after a wait for room under the cache
    /// limits (a pass that never comes here; the bench's jobs waited 2 s).
    func testABackgroundJobPastItsDailyBytes_isRefusedWithoutWaitingForRoom() throws {
        _ = addContent(count: 1 << 20)
        var settings = self.settings
        let allowance = BackgroundAllowance(bytesPerDay: 1_000, store: nil)
        settings.backgroundDaily = allowance
        let budget = CacheBudget {}
        budget.measured(room: 0, since: budget.mark, lowWater: 0)
        let loader = FileLoader(source: Source(name: "video.mp4", url: url), store: store, fetcher: fetcher,
                                settings: settings, budget: budget)
        _ = try loader.attributes()
        let requests = fetcher.requestCount
        XCTAssertThrowsError(try read(loader, at: 0, count: 100_000, pattern: ReadPattern(readClass: .background))) {
            XCTAssertEqual(($0 as? MediaError)?.errno, EIO)
        }
        XCTAssertEqual(budget.counts.unansweredWaits, 0, "it waited for a pass")
        XCTAssertEqual(fetcher.requestCount, requests)
    }

    func testRelease_cancelsReadaheadNoOneWaitsOn() throws {
        let source = addContent(count: 16 << 20)
        let loader = makeLoader()
        let pattern = ReadPattern()
        try growReadahead(loader, pattern: pattern, source: source)
        let held = fetcher.transfersWaitingAtHold
        XCTAssertTrue(fetcher.cancelled.isEmpty)
        loader.release(pattern)
        XCTAssertEqual(Set(fetcher.cancelled), held)
        XCTAssertTrue(fetcher.waitUntil { f in held.allSatisfy { f.record($0)!.finished } })
    }

    /// A 16 MiB file, a loader with `grace`, and a handle whose readahead
    /// has grown, its transfer held at the fetcher.
    private func streamingHandle(grace: Double, clock: Clock = .system) throws
        -> (source: [UInt8], loader: FileLoader, handle: ReadPattern) {
        let source = addContent(count: 16 << 20)
        let loader = graceLoader(grace, clock: clock)
        let handle = ReadPattern()
        loader.attach(handle)
        try growReadahead(loader, pattern: handle, source: source)
        return (source, loader, handle)
    }

    private func graceLoader(_ seconds: Double, clock: Clock = .system) -> FileLoader {
        var settings = self.settings
        settings.handleGrace = seconds
        settings.clock = clock
        return makeLoader(settings: settings)
    }

    /// Plex closes and opens a file every few MiB: the next handle that
    /// reads on where the closed one stopped takes its running transfer
    /// (no request for bytes in flight, nothing stopped) and its window.
    func testRelease_withAGracePeriod_handsTheRunningReadaheadToTheHandleThatReadsOn() throws {
        let (source, loader, closed) = try streamingHandle(grace: 60)
        let asked = fetcher.gets.count
        loader.release(closed)
        XCTAssertTrue(fetcher.cancelled.isEmpty, "a closed handle's readahead was stopped within its grace")
        let reopened = ReadPattern()
        loader.attach(reopened)
        let at: Int64 = 6 << 20
        let reading = Background { try Self.read(loader, at: at, count: 128 << 10, pattern: reopened) }
        XCTAssertTrue(eventually { loader.waitingReads == 1 })
        fetcher.release()
        XCTAssertEqual(try reading.result(), Self.expected(source, at, 128 << 10))
        XCTAssertTrue(fetcher.cancelled.isEmpty)
        XCTAssertTrue(fetcher.gets.dropFirst(asked).allSatisfy { $0.range!.lowerBound >= at + (128 << 10) },
                      "a request for bytes the closed handle's transfer was fetching: \(fetcher.gets.map(\.range))")
        XCTAssertGreaterThan(reopened.window, 0, "the window went on, not from cold")
        XCTAssertEqual(loader.statistics.graceResumes.load(ordering: .relaxed), 1)
    }

    /// FUSE sends a release after the close: the new handle may read
    /// before the old one is released. The release hands it over then.
    func testALateRelease_handsItsTransfersAndStreakToTheHandleOpenedAfterIt() throws {
        let (source, loader, closed) = try streamingHandle(grace: 60)
        let asked = fetcher.gets.count
        let reopened = ReadPattern()
        loader.attach(reopened)
        let at: Int64 = 6 << 20
        let reading = Background { try Self.read(loader, at: at, count: 128 << 10, pattern: reopened) }
        XCTAssertTrue(eventually { loader.waitingReads == 1 })
        XCTAssertEqual(reopened.window, 0, "cold until the old handle's release")
        loader.release(closed)
        XCTAssertTrue(fetcher.cancelled.isEmpty)
        XCTAssertGreaterThan(reopened.window, 0, "the released handle's streak goes on in its sequel")
        fetcher.release()
        XCTAssertEqual(try reading.result(), Self.expected(source, at, 128 << 10))
        XCTAssertTrue(fetcher.gets.dropFirst(asked).allSatisfy { $0.range!.lowerBound >= at + (128 << 10) })
        XCTAssertEqual(loader.statistics.graceResumes.load(ordering: .relaxed), 1)
    }

    func testAClosedHandleNobodyTakesOver_stopsItsTransfersOnceItsGraceEnds() throws {
        let time = TestClock()
        let (source, loader, closed) = try streamingHandle(grace: 60, clock: time.clock)
        let held = fetcher.transfersWaitingAtHold
        XCTAssertFalse(held.isEmpty)
        loader.release(closed)
        XCTAssertTrue(fetcher.cancelled.isEmpty)
        // A far read by another handle does not take it over.
        let other = ReadPattern()
        loader.attach(other)
        XCTAssertEqual(try read(loader, at: 0, count: 4096, pattern: other), Self.expected(source, 0, 4096))
        loader.flush()
        XCTAssertTrue(fetcher.cancelled.isEmpty, "a flusher's pass within the grace stopped them")
        time.advance(61)
        loader.flush()
        XCTAssertEqual(Set(fetcher.cancelled), held, "the flusher's pass ends the grace")
        XCTAssertEqual(loader.statistics.graceResumes.load(ordering: .relaxed), 0)
        fetcher.release()
    }

    func testRelease_ofOneHandle_keepsTransferAnotherHandleWaitsOn() throws {
        let source = addContent(count: 16 << 20)
        let loader = makeLoader()
        let pattern = ReadPattern()
        try growReadahead(loader, pattern: pattern, source: source)
        let held = fetcher.transfersWaitingAtHold
        let waited: Int64 = (6 << 20) + (32 << 10)
        let waiter = Background { try Self.read(loader, at: waited, count: 4096) }
        XCTAssertTrue(eventually { loader.waitingReads == 1 }, "the waiter never waited for bytes")
        loader.release(pattern)
        fetcher.release()
        XCTAssertEqual(try waiter.result(), Self.expected(source, waited, 4096))
        XCTAssertTrue(Set(fetcher.cancelled).isDisjoint(with: held.filter { id in
            fetcher.record(id)!.body.contains(waited)
        }))
    }

    // MARK: Streaming

    func testRead_ofFirstBytes_returnsBeforeTheTransferEnds() throws {
        let source = addContent(count: 4 << 20)
        let loader = makeLoader()
        _ = try loader.contentInfo()
        fetcher.hold((64 << 10)..<Int64.max)
        let big = Background { try Self.read(loader, at: 0, count: 1 << 20) }
        XCTAssertTrue(fetcher.waitUntil { $0.transfersWaitingAtHold.count == 1 })
        XCTAssertEqual(try read(loader, at: 0, count: 4096), Self.expected(source, 0, 4096))
        let transfer = fetcher.gets[0]
        XCTAssertFalse(fetcher.record(transfer.id)!.finished)
        XCTAssertEqual(fetcher.gets.count, 1)
        fetcher.release()
        XCTAssertEqual(try big.result(), Self.expected(source, 0, 1 << 20))
    }

    // MARK: The end of the file

    func testRead_acrossTheEnd_isShort() throws {
        let source = addContent(count: 100_000)
        let loader = makeLoader()
        XCTAssertEqual(try read(loader, at: 90_000, count: 65536), Self.expected(source, 90_000, 10_000))
        XCTAssertEqual(fetcher.gets.map(\.range), [90_000..<100_000])
    }

    func testRead_atAndPastTheEnd_returnsNothingWithoutAGet() throws {
        _ = addContent(count: 100_000)
        let loader = makeLoader()
        XCTAssertEqual(try read(loader, at: 100_000, count: 4096), [])
        XCTAssertEqual(try read(loader, at: 1 << 30, count: 4096), [])
        XCTAssertEqual(fetcher.gets.count, 0)
    }

    func testRead_ofZeroLengthFile_returnsNothing() throws {
        fetcher.add(url, bytes: [])
        let loader = makeLoader()
        XCTAssertEqual(try loader.contentInfo().length, 0)
        XCTAssertEqual(try read(loader, at: 0, count: 4096), [])
        XCTAssertEqual(fetcher.gets.count, 0)
    }

    // MARK: Server failures

    /// A loader of a 1000-byte file whose server misbehaves as `configure` says.
    private func makeFailingLoader(_ configure: (inout FakeFetcher.Resource) -> Void) -> FileLoader {
        var resource = FakeFetcher.Resource(bytes: Self.content(count: 1000))
        configure(&resource)
        fetcher.add(url, resource)
        return makeLoader()
    }

    func testNotFound_makesReadAndContentInfoThrowENOENT() throws {
        let loader = makeFailingLoader { $0.status = 404 }
        XCTAssertThrowsError(try loader.contentInfo()) { XCTAssertEqual(($0 as? MediaError)?.errno, ENOENT) }
        XCTAssertThrowsError(try read(loader, at: 0, count: 10)) { XCTAssertEqual(($0 as? MediaError)?.errno, ENOENT) }
    }

    func testNotFound_onGetAfterASuccessfulHead_makesReadThrowENOENT() throws {
        let loader = makeFailingLoader { $0.getStatus = 404 }
        XCTAssertThrowsError(try read(loader, at: 0, count: 10)) { XCTAssertEqual(($0 as? MediaError)?.errno, ENOENT) }
    }

    func testServiceUnavailable_onEveryGet_makesReadThrowEIOAfterBoundedAttempts() throws {
        let loader = makeFailingLoader { $0.getStatus = 503 }
        XCTAssertThrowsError(try read(loader, at: 0, count: 10)) { XCTAssertEqual(($0 as? MediaError)?.errno, EIO) }
        XCTAssertGreaterThan(fetcher.gets.count, 0)
        XCTAssertLessThanOrEqual(fetcher.gets.count, settings.maxAttempts)
    }

    func testServiceUnavailable_onHeadAndGet_makesContentInfoThrowEIOAfterBoundedRetries() throws {
        let loader = makeFailingLoader { $0.status = 503 }
        XCTAssertThrowsError(try loader.contentInfo()) { XCTAssertEqual(($0 as? MediaError)?.errno, EIO) }
        XCTAssertEqual(fetcher.heads.count, settings.maxAttempts)
        XCTAssertEqual(fetcher.gets.map(\.range), Array(repeating: 0..<1, count: settings.maxAttempts))
    }

    func testUnreachableServer_makesContentInfoThrowEIO() throws {
        let loader = makeFailingLoader { $0.transportError = true }
        XCTAssertThrowsError(try loader.contentInfo()) { XCTAssertEqual(($0 as? MediaError)?.errno, EIO) }
    }

    func testShortResponse_once_isRetriedForTheRestAndReturnsExactBytes() throws {
        for endsWithError in [true, false] {
            let source = Self.content(count: 1 << 20)
            var resource = FakeFetcher.Resource(bytes: source)
            resource.shortBy = 1000
            resource.shortResponses = 1
            resource.shortEndsWithError = endsWithError
            let fetcher = makeFetcher()
            fetcher.add(url, resource)
            store.remove(key: url)
            let loader = makeLoader(fetcher: fetcher)
            XCTAssertEqual(try read(loader, at: 0, count: 100_000), Self.expected(source, 0, 100_000))
            XCTAssertEqual(fetcher.gets.map(\.range), [0..<100_000, 99_000..<100_000], "error: \(endsWithError)")
        }
    }

    func testShortResponse_always_makesReadThrowEIONeverWrongBytes() throws {
        for endsWithError in [true, false] {
            var resource = FakeFetcher.Resource(bytes: Self.content(count: 1 << 20))
            resource.shortBy = 1000
            resource.shortEndsWithError = endsWithError
            let fetcher = makeFetcher()
            fetcher.add(url, resource)
            store.remove(key: url)
            let loader = makeLoader(fetcher: fetcher)
            XCTAssertThrowsError(try read(loader, at: 0, count: 100_000)) {
                XCTAssertEqual(($0 as? MediaError)?.errno, EIO)
            }
            XCTAssertLessThanOrEqual(fetcher.gets.count, settings.maxAttempts)
        }
    }

    func testServerIgnoringRange_answering200WithWholeBody_stillGivesExactBytes() throws {
        let source = Self.content(count: 1 << 20)
        var resource = FakeFetcher.Resource(bytes: source)
        resource.ignoresRange = true
        fetcher.add(url, resource)
        let loader = makeLoader()
        XCTAssertEqual(try read(loader, at: 500_000, count: 10_000), Self.expected(source, 500_000, 10_000))
        XCTAssertEqual(try read(loader, at: 3, count: 100), Self.expected(source, 3, 100))
        XCTAssertEqual(try read(loader, at: (1 << 20) - 50, count: 100), Self.expected(source, (1 << 20) - 50, 100))
    }

    func testContentChangedOnServer_makesReadThrowEIONotMixedBytes() throws {
        let source = addContent(count: 1 << 20)
        let loader = makeLoader()
        XCTAssertEqual(try read(loader, at: 0, count: 1000), Self.expected(source, 0, 1000))
        fetcher.update(url) {
            $0.bytes = Self.content(count: 1 << 20, seed: 2)
            $0.etag = "\"v2\""
        }
        XCTAssertThrowsError(try read(loader, at: 5000, count: 1000)) {
            XCTAssertEqual(($0 as? MediaError)?.errno, EIO)
        }
        XCTAssertTrue(fetcher.gets.allSatisfy { $0.ifRange == "\"v1\"" })
    }

    func testRead_spanningMoreHolesThanAttempts_returnsExactBytes() throws {
        let source = addContent(count: 1 << 20)
        let loader = makeLoader()
        // Small islands of cached bytes cut the later read into 7 holes,
        // more than `maxAttempts`: asking for each once is not a retry.
        for island in 1...6 {
            _ = try read(loader, at: Int64(island) * 128 * Self.kib, count: 100)
        }
        XCTAssertEqual(try read(loader, at: 0, count: 1 << 20), source)
    }

    // MARK: Kernel reads (FUSE passthrough)

    private func readAll(_ fd: Int32, count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, count, 0) }
        return Array(bytes[..<max(n, 0)])
    }

    func testKernelReads_startOnlyOnceEveryByteIsCached() throws {
        let source = addContent(count: 300_000)
        let loader = makeLoader()
        _ = try read(loader, at: 0, count: 1000)
        XCTAssertNil(loader.beginKernelReads())
        _ = try read(loader, at: 0, count: source.count)
        let (fd, _) = try XCTUnwrap(loader.beginKernelReads())
        defer { close(fd) }
        XCTAssertEqual(readAll(fd, count: source.count + 1), source)
    }

    func testPurge_whileTheKernelReads_leavesItsFileWholeAndStartsANewOne() throws {
        let source = addContent(count: 300_000)
        let loader = makeLoader()
        _ = try read(loader, at: 0, count: source.count)
        let (fd, version) = try XCTUnwrap(loader.beginKernelReads())
        defer { close(fd) }
        loader.purge()
        XCTAssertEqual(readAll(fd, count: source.count), source, "the kernel's file changed under it")
        XCTAssertEqual(loader.status().cachedBytes, 0)
        let before = fetcher.requestCount
        XCTAssertEqual(try read(loader, at: 0, count: source.count), source)
        XCTAssertGreaterThan(fetcher.requestCount, before, "purged bytes were not fetched again")
        // The old file's readers closing says nothing of the new file.
        loader.endKernelReads(version: version)
        let (fresh, newVersion) = try XCTUnwrap(loader.beginKernelReads())
        defer { close(fresh) }
        XCTAssertNotEqual(newVersion, version)
        XCTAssertEqual(readAll(fresh, count: source.count), source)
    }

    func testKernelReads_overlappingOnOneFile_keepItUntilTheLastEnds() throws {
        let source = addContent(count: 300_000)
        let loader = makeLoader()
        _ = try read(loader, at: 0, count: source.count)
        let (first, version) = try XCTUnwrap(loader.beginKernelReads())
        let (second, _) = try XCTUnwrap(loader.beginKernelReads())
        defer { close(first); close(second) }
        // The first backing's end arrives after the second began.
        loader.endKernelReads(version: version)
        loader.purge()
        XCTAssertEqual(readAll(second, count: source.count), source, "a file the kernel still reads was emptied")
    }

    func testEvictionAndTrimming_leaveAFileTheKernelReads() throws {
        let source = addContent(count: 300_000)
        let loader = makeLoader()
        _ = try read(loader, at: 0, count: source.count)
        // A read returns as its bytes arrive; its transfer ends a moment later.
        XCTAssertTrue(fetcher.waitUntil { _ in loader.status().state == .idle })
        let (fd, version) = try XCTUnwrap(loader.beginKernelReads())
        defer { close(fd) }
        XCTAssertTrue(loader.usage().isBusy)
        XCTAssertFalse(loader.evict())
        loader.trim(to: 0)
        XCTAssertEqual(loader.status().cachedBytes, Int64(source.count))
        XCTAssertEqual(readAll(fd, count: source.count), source)
        loader.endKernelReads(version: version)
        XCTAssertTrue(loader.evict())
        XCTAssertEqual(loader.status().cachedBytes, 0)
    }

    // MARK: Many readers

    func testRandomConcurrentReads_fromFourThreads_matchTheSourceByteForByte() throws {
        let length = 8 << 20
        // A server slower than the reader, so reads find their handle's
        // transfer still running: that is when readahead tops up.
        fetcher.setChunkDelay(0.005)
        let source = addContent(count: length)
        let loader = makeLoader()
        let readers = (0..<4).map { thread in
            Background { () -> [String] in
                var random = SplitMix64(seed: 42 + UInt64(thread))
                let pattern = ReadPattern()
                var failures: [String] = []
                for step in 0..<60 {
                    let sequential = random.next() % 3 == 0
                    let offset = Int64(random.next() % UInt64(length + 200_000))
                    let count = Int(random.next() % (sequential ? 256 << 10 : 64 << 10)) + 1
                    let got = try Self.read(loader, at: offset, count: count, pattern: pattern)
                    if got != Self.expected(source, offset, count) {
                        failures.append("thread \(thread) step \(step): \(count) bytes at \(offset)")
                    }
                    if sequential {
                        var next = offset + Int64(count)
                        for _ in 0..<8 {
                            let got = try Self.read(loader, at: next, count: 128 << 10, pattern: pattern)
                            if got != Self.expected(source, next, 128 << 10) {
                                failures.append("thread \(thread) step \(step): 128 KiB at \(next)")
                            }
                            next += 128 << 10
                        }
                    }
                }
                loader.release(pattern)
                return failures
            }
        }
        for reader in readers {
            XCTAssertEqual(try reader.result(timeout: 60), [])
        }
    }

    func testRandomReads_duringPurgesTrimsAndEvictions_returnTheSourceNeverZeros() throws {
        let length = 4 << 20
        let source = addContent(count: length)
        let loader = makeLoader()
        _ = try loader.contentInfo()
        // Bounded by time so it fits any machine; the count of rounds is not asserted.
        let stop = Date(timeIntervalSinceNow: 3)
        let readers = (0..<4).map { thread in
            Background { () -> [String] in
                var random = SplitMix64(seed: 7 + UInt64(thread))
                let pattern = ReadPattern()
                var failures: [String] = []
                while Date() < stop && failures.count < 5 {
                    let offset = Int64(random.next() % UInt64(length))
                    let count = Int(random.next() % (252 << 10)) + (4 << 10)
                    do {
                        let got = try Self.read(loader, at: offset, count: count, pattern: pattern)
                        if got != Self.expected(source, offset, count) {
                            let zeros = got.filter { $0 == 0 }.count
                            failures.append("thread \(thread): \(count) bytes at \(offset) wrong (\(zeros) zero bytes)")
                        }
                    } catch {
                        failures.append("thread \(thread): \(count) bytes at \(offset) failed: \(error)")
                    }
                }
                loader.release(pattern)
                return failures
            }
        }
        let maintenance = Background { () -> Int in
            var random = SplitMix64(seed: 99)
            var rounds = 0
            while Date() < stop {
                switch random.next() % 3 {
                case 0: loader.purge()
                case 1: loader.trim(to: Int64(random.next() % UInt64(length)))
                default: _ = loader.evict()
                }
                rounds += 1
                // The stress's rate, not a wait for anything: between two
                // freeings the readers fetch and cache bytes for the next to
                // race with, where a tight loop would leave little cached.
                usleep(2000)
            }
            return rounds
        }
        for reader in readers {
            XCTAssertEqual(try reader.result(timeout: 60), [])
        }
        XCTAssertGreaterThan(try maintenance.result(timeout: 60), 0)
    }

    // MARK: Reading

    private func read(_ loader: FileLoader, at offset: Int64, count: Int,
                      pattern: ReadPattern = ReadPattern()) throws -> [UInt8] {
        try Self.read(loader, at: offset, count: count, pattern: pattern)
    }

    private static func read(_ loader: FileLoader, at offset: Int64, count: Int,
                             pattern: ReadPattern = ReadPattern()) throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0xEE, count: count)
        let n = try buffer.withUnsafeMutableBytes { try loader.read(into: $0, at: offset, pattern: pattern) }
        return Array(buffer[..<n])
    }
}
