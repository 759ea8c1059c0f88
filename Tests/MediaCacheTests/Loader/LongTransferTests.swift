// The loader's long transfers against a FakeFetcher that holds them as
// CurlFetcher does: a handle that streams asks for the rest of the file
// once, held at its window and let go on as it reads; a read that joins
// past the hold lets it go on to its bytes; a transfer that gives its
// connection up is no failure, and the next read asks again for what it
// did not bring. Only generous timeouts guard against hangs.
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

final class LongTransferTests: XCTestCase {
    private var base = ""
    private var store: CacheStore!
    private var fetcher: FakeFetcher!
    private let url = "https://media.example/films/long.mp4"
    private static let kib: Int64 = 1 << 10
    private static let mib: Int64 = 1 << 20

    override func setUpWithError() throws {
        base = try TemporaryDirectory.make("long")
        store = try CacheStore(root: base)
        fetcher = FakeFetcher(chunkSize: 64 << 10)
        fetcher.setHolds(true)
    }

    override func tearDownWithError() throws {
        fetcher.shutdown()
        try? FileManager.default.removeItem(atPath: base)
    }

    /// `farLink`: a link of a 50 ms round trip (rate unknown), over which a
    /// player's first read starts its stream (decision 0056).
    private func makeLoader(farLink: Bool = false) -> FileLoader {
        var settings = LoaderSettings()
        settings.timeout = 10
        settings.probeFirstBytes = 0
        settings.tailStretch = 0
        settings.link = nil
        if farLink {
            let link = LinkEstimate()
            link.roundTrip(0.05, to: url)
            settings.link = link
        }
        return FileLoader(source: Source(name: "long.mp4", url: url), store: store, fetcher: fetcher,
                          settings: settings)
    }

    private func content(_ count: Int) -> [UInt8] {
        var random = SplitMix64(seed: 7)
        let bytes = random.bytes(count)
        fetcher.add(url, bytes: bytes)
        return bytes
    }

    private func read(_ loader: FileLoader, at offset: Int64, count: Int, pattern: ReadPattern) throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0xEE, count: count)
        let n = try buffer.withUnsafeMutableBytes { try loader.read(into: $0, at: offset, pattern: pattern) }
        return Array(buffer[..<n])
    }

    /// Reads `count` bytes from `offset` in 128 KiB reads, checking each.
    private func stream(_ loader: FileLoader, _ source: [UInt8], from offset: Int64, count: Int64,
                        pattern: ReadPattern) throws {
        var at = offset
        while at < offset + count {
            let piece = Int(min(128 * Self.kib, Int64(source.count) - at))
            XCTAssertEqual(try read(loader, at: at, count: piece, pattern: pattern),
                           Array(source[Int(at)..<Int(at) + piece]), "at \(at)")
            at += Int64(piece)
        }
    }

    /// Streams the first 8 MiB (a 4 MiB window), then waits for the one
    /// long transfer to hold: the start of most tests here.
    private func streamUntilHeld(_ loader: FileLoader, _ source: [UInt8],
                                 pattern: ReadPattern) throws -> FakeFetcher.Record {
        try stream(loader, source, from: 0, count: 8 * Self.mib, pattern: pattern)
        let long = try XCTUnwrap(longGets.first, "\(fetcher.gets.map { $0.range! })")
        XCTAssertTrue(fetcher.waitUntil { $0.isHeld(long.id) }, "held at its allowance")
        return long
    }

    private var longGets: [FakeFetcher.Record] {
        fetcher.gets.filter { $0.request.allowance != nil }
    }

    private func assertNoByteFetchedTwice(file: StaticString = #filePath, line: UInt = #line) {
        let spans = fetcher.gets.map { $0.body.lowerBound..<($0.body.lowerBound + $0.delivered) }
            .sorted { $0.lowerBound < $1.lowerBound }
        for (a, b) in zip(spans, spans.dropFirst()) {
            XCTAssertLessThanOrEqual(a.upperBound, b.lowerBound, "\(a) and \(b) overlap", file: file, line: line)
        }
    }

    func testAStreamingHandleMakesOneLongTransferHeldAtItsWindowAndLetGoOnAsItReads() throws {
        let length = 32 * Self.mib
        let source = content(Int(length))
        let loader = makeLoader()
        let pattern = ReadPattern()
        try stream(loader, source, from: 0, count: 8 * Self.mib, pattern: pattern)

        let long = try XCTUnwrap(longGets.first, "\(fetcher.gets.map { $0.range! })")
        XCTAssertEqual(longGets.count, 1)
        XCTAssertEqual(long.range?.upperBound, length, "the rest of the file, in one request")
        // The handle stops reading: the transfer holds at its window (8 MiB
        // read, a 4 MiB window), far from the end of the file.
        XCTAssertTrue(fetcher.waitUntil { $0.isHeld(long.id) }, "held at its allowance")
        let held = try XCTUnwrap(fetcher.record(long.id))
        // Let go on in steps of at most FileLoader.holdStep.
        let hold = held.body.lowerBound + held.allowance
        XCTAssertTrue((12 * Self.mib - FileLoader.holdStep)...(12 * Self.mib) ~= hold, "held at \(hold)")
        XCTAssertLessThanOrEqual(held.delivered, held.allowance + fetcher.chunkSize)

        try stream(loader, source, from: 8 * Self.mib, count: length - 8 * Self.mib, pattern: pattern)
        XCTAssertEqual(longGets.count, 1, "the one long transfer brought the rest")
        assertBroughtToTheEnd(long.id, fileOf: length)
    }

    /// The long transfer ended at the end of the file without an error, and
    /// every byte of the file came once.
    private func assertBroughtToTheEnd(_ id: TransferID, fileOf length: Int64,
                                       file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(fetcher.waitUntil { $0.record(id)?.finished == true }, file: file, line: line)
        XCTAssertNil(fetcher.record(id)?.completion, file: file, line: line)
        assertNoByteFetchedTwice(file: file, line: line)
        XCTAssertEqual(fetcher.gets.reduce(0) { $0 + $1.delivered }, length, file: file, line: line)
    }

    func testAReadOfAnotherHandleJustPastTheHoldLetsTheTransferGoOnToItsBytes() throws {
        let source = content(Int(32 * Self.mib))
        let loader = makeLoader()
        let long = try streamUntilHeld(loader, source, pattern: ReadPattern())
        let requests = fetcher.gets.count
        // Half a MiB past the hold, within the distance a held transfer is
        // joined at (LoaderState.heldJoinDistance).
        let record = try XCTUnwrap(fetcher.record(long.id))
        let at = record.body.lowerBound + record.allowance + 512 * Self.kib
        XCTAssertEqual(try read(loader, at: at, count: 64 << 10, pattern: ReadPattern()),
                       Array(source[Int(at)..<Int(at) + (64 << 10)]))
        XCTAssertEqual(fetcher.gets.count, requests, "the read joined the held transfer")
        assertNoByteFetchedTwice()
    }

    /// A second stream far past the first one's held transfer reads ahead
    /// with transfers of its own: the held one is not let go on to it.
    /// (Which of two transfers covering a lead readAhead met first was the
    /// dictionary's order, so this passed on the code that let it go on;
    /// test_round_trips's seek after `ls -l` is the one that failed.)
    func testAStreamFarPastAHeldTransferReadsAheadOnItsOwnAndTheHeldOneStaysHeld() throws {
        let source = content(Int(48 * Self.mib))
        let loader = makeLoader()
        let long = try streamUntilHeld(loader, source, pattern: ReadPattern())
        let record = try XCTUnwrap(fetcher.record(long.id))
        try stream(loader, source, from: 30 * Self.mib, count: 4 * Self.mib, pattern: ReadPattern())
        let after = try XCTUnwrap(fetcher.record(long.id))
        XCTAssertLessThanOrEqual(after.delivered, record.allowance + fetcher.chunkSize,
                                 "the held transfer fetched the gap: \(fetcher.gets.map { $0.range! })")
        assertNoByteFetchedTwice()
    }

    func testAReadFarPastTheHoldAsksForItsOwnBytesAndTheHeldTransferDoesNotFetchTheGap() throws {
        let source = content(Int(32 * Self.mib))
        let loader = makeLoader()
        let long = try streamUntilHeld(loader, source, pattern: ReadPattern())
        let record = try XCTUnwrap(fetcher.record(long.id))
        let hold = record.body.lowerBound + record.allowance
        // 4 MiB past the hold: within the join distance of a running
        // transfer, but a held one would fetch those 4 MiB for this read.
        let at = hold + 4 * Self.mib
        XCTAssertEqual(try read(loader, at: at, count: 64 << 10, pattern: ReadPattern()),
                       Array(source[Int(at)..<Int(at) + (64 << 10)]))
        XCTAssertEqual(fetcher.gets.last?.range?.lowerBound, at, "its own request")
        let after = try XCTUnwrap(fetcher.record(long.id))
        XCTAssertLessThanOrEqual(after.delivered, record.allowance + fetcher.chunkSize, "the gap was not fetched")
        assertNoByteFetchedTwice()
    }

    func testATransferThatGivesItsConnectionUpIsNoFailureAndTheNextReadAsksAgain() throws {
        let length = 32 * Self.mib
        let source = content(Int(length))
        let loader = makeLoader()
        let pattern = ReadPattern()
        let long = try streamUntilHeld(loader, source, pattern: pattern)
        fetcher.yieldHeld(long.id)
        XCTAssertTrue(fetcher.waitUntil { $0.record(long.id)?.finished == true })
        XCTAssertEqual(fetcher.record(long.id)?.completion?.errno, FetchError.yielded)

        // No backoff, no error: the stream reads on at once, and what the
        // yielded transfer did not bring is asked for again, once.
        try stream(loader, source, from: 8 * Self.mib, count: length - 8 * Self.mib, pattern: pattern)
        XCTAssertEqual(longGets.count, 2, "\(fetcher.gets.map { $0.range! })")
        let yielded = try XCTUnwrap(fetcher.record(long.id))
        XCTAssertEqual(longGets.last?.range?.lowerBound, yielded.body.lowerBound + yielded.delivered,
                       "the next one begins where it stopped")
        assertNoByteFetchedTwice()
    }

    // MARK: A player's lookup's stream (decision 0061)

    /// A cold file looked up by a known player (`attributes(streams:)`),
    /// every answer telling `roundTrip`; returns the loader and the
    /// lookup's one request.
    private func lookedUpByAPlayer(answering roundTrip: Double,
                                   clock: Clock = .system) throws -> (FileLoader, FakeFetcher.Record) {
        fetcher.setAnswerRoundTrip(roundTrip)
        var settings = LoaderSettings()
        settings.timeout = 10
        settings.tailStretch = 0
        settings.link = LinkEstimate()
        settings.clock = clock
        let loader = FileLoader(source: Source(name: "long.mp4", url: url), store: store, fetcher: fetcher,
                                settings: settings)
        XCTAssertEqual(try loader.attributes(lookup: { var reader = Reader.player; reader.streamsFromLookup = true; return reader }).size, 32 * Self.mib)
        let lookup = try XCTUnwrap(fetcher.gets.first)
        XCTAssertEqual(fetcher.gets.count, 1)
        XCTAssertEqual(lookup.range, 0..<FetchRequest.toTheEnd, "the whole file asked for")
        XCTAssertEqual(lookup.request.allowance, LoaderSettings().probeFirstBytes, "held after the head")
        return (loader, lookup)
    }

    func testAPlayersLookupOverAFarLinkIsItsStreamAndItsReadsGoOnInItWithNoRequestMore() throws {
        let source = content(Int(32 * Self.mib))
        let (loader, lookup) = try lookedUpByAPlayer(answering: 0.05)
        XCTAssertTrue(fetcher.waitUntil { $0.isHeld(lookup.id) }, "held at the head's end")
        XCTAssertEqual(streamsAhead(loader), 1)
        let process = ReaderProcess(pid: 9, startTime: 1, name: "ffmpeg", arguments: "", parentName: "")
        let pattern = ReadPattern(.player, account: ReaderBook().opened(by: process, as: .play, file: "/long.mp4"))
        loader.attach(pattern)
        try stream(loader, source, from: 0, count: 32 * Self.mib, pattern: pattern)
        XCTAssertEqual(fetcher.gets.count, 1, "\(fetcher.gets.map { $0.range! })")
        assertBroughtToTheEnd(lookup.id, fileOf: 32 * Self.mib)
        XCTAssertGreaterThan(try XCTUnwrap(pattern.account).bytesFetched, 16 * Self.mib,
                             "the stream's bytes past the head were no one's")
        loader.release(pattern)
    }

    /// The demuxer reads its head (joining the stream), jumps to its index
    /// (present: the lookahead's), then reads on: the jump does not stop
    /// the stream, which brings the rest with no request more.
    func testAPlayersLookupStreamOutlivesTheDemuxersDetourToItsIndex() throws {
        let source = content(Int(32 * Self.mib))
        // The head's bytes held back: the first read waits on the stream.
        fetcher.hold(0..<(64 << 10))
        let (loader, lookup) = try lookedUpByAPlayer(answering: 0.05)
        let pattern = ReadPattern()
        loader.attach(pattern)
        let first = Background { () -> [UInt8] in
            var buffer = [UInt8](repeating: 0, count: 64 << 10)
            let n = try buffer.withUnsafeMutableBytes { try loader.read(into: $0, at: 0, pattern: pattern) }
            return Array(buffer[..<n])
        }
        XCTAssertTrue(fetcher.waitUntil { _ in loader.waitingReads == 1 }, "the first read never waited on the stream")
        fetcher.release()
        XCTAssertEqual(try first.result(), Array(source[..<(64 << 10)]))
        try assertADetourToTheIndexKeeps(lookup, loader, source, pattern: pattern)
        loader.release(pattern)
    }

    /// The container's index, at the end, cached meanwhile (as the
    /// lookahead brings it; here another reader's read); the demuxer reads
    /// it, then its samples from the head on: `stream` is not stopped and
    /// brings them, no request more.
    private func assertADetourToTheIndexKeeps(_ stream: FakeFetcher.Record, _ loader: FileLoader, _ source: [UInt8],
                                              pattern: ReadPattern) throws {
        let index = 31 * Self.mib
        _ = try read(loader, at: index, count: 64 << 10, pattern: ReadPattern(readClass: .scan))
        XCTAssertEqual(try read(loader, at: index, count: 64 << 10, pattern: pattern),
                       Array(source[Int(index)..<Int(index) + (64 << 10)]))
        XCTAssertFalse(fetcher.cancelled.contains(stream.id), "a detour to cached bytes stopped the stream")
        let requests = fetcher.gets.count
        try self.stream(loader, source, from: 64 * Self.kib, count: 4 * Self.mib, pattern: pattern)
        XCTAssertEqual(fetcher.gets.count, requests, "the stream did not bring the samples: \(fetcher.gets.map { $0.range! })")
        assertNoByteFetchedTwice()
    }

    func testAPlayersLookupOverANearLinkKeepsOnlyTheHead() throws {
        let source = content(Int(32 * Self.mib))
        let (loader, lookup) = try lookedUpByAPlayer(answering: 0.001)
        XCTAssertTrue(fetcher.waitUntil { $0.record(lookup.id)?.finished == true }, "cut after the head")
        XCTAssertEqual(streamsAhead(loader), 0)
        let head = Int(LoaderSettings().probeFirstBytes)
        XCTAssertEqual(try read(loader, at: 0, count: head, pattern: ReadPattern()), Array(source[..<head]))
        XCTAssertEqual(fetcher.gets.count, 1, "the head was cached")
    }

    /// A player that looked and opened nothing (its stat of a file it does
    /// not play): the flusher's pass stops its stream once no open came
    /// within `unclaimedStreamLife`, not before.
    func testAPlayersLookupThatNoOpenFollowsIsStoppedByTheFlusherPass() throws {
        _ = content(Int(32 * Self.mib))
        let time = TestClock()
        let (loader, lookup) = try lookedUpByAPlayer(answering: 0.05, clock: time.clock)
        XCTAssertTrue(fetcher.waitUntil { $0.isHeld(lookup.id) }, "held at the head's end")
        loader.flush()
        XCTAssertFalse(fetcher.cancelled.contains(lookup.id), "stopped before a player would have opened")
        time.advance(FileLoader.unclaimedStreamLife)
        loader.flush()
        XCTAssertTrue(fetcher.waitUntil { $0.record(lookup.id)?.finished == true }, "no open came: stopped")
        XCTAssertTrue(fetcher.cancelled.contains(lookup.id))
    }

    // MARK: A player's stream from its first read (decision 0056)

    private func streamsAhead(_ loader: FileLoader) -> Int64 {
        loader.statistics.probing.streamsAhead.load(ordering: .relaxed)
    }

    func testAPlayersFirstReadAtTheStartStartsItsStreamPastItAtOnceAndItsReadsJoinIt() throws {
        let length = 32 * Self.mib
        let source = content(Int(length))
        let loader = makeLoader(farLink: true)
        let pattern = ReadPattern()
        XCTAssertEqual(try read(loader, at: 0, count: 128 << 10, pattern: pattern), Array(source[..<(128 << 10)]))
        // The read's bytes, and beside them the rest of the file, held a
        // window (linkStart) past the read: before any read gets there.
        let ahead = try XCTUnwrap(longGets.first, "\(fetcher.gets.map { $0.range! })")
        XCTAssertEqual(ahead.range, (128 * Self.kib)..<length)
        XCTAssertEqual(ahead.request.allowance, ReadPattern.linkStart)
        XCTAssertEqual(ahead.priority, .readahead)
        XCTAssertEqual(streamsAhead(loader), 1)
        // Reading on joins it: no request more, the one long transfer
        // let go on as the reads go.
        try stream(loader, source, from: 128 * Self.kib, count: length - 128 * Self.kib, pattern: pattern)
        XCTAssertEqual(fetcher.gets.count, 2, "\(fetcher.gets.map { $0.range! })")
        assertBroughtToTheEnd(ahead.id, fileOf: length)
    }

    /// The stream's bytes are its reader's from its first byte, before
    /// any read joins it (who read what: `status --readers`).
    func testAStreamAheadsBytesCountInItsReadersAccountFromTheStart() throws {
        _ = content(Int(32 * Self.mib))
        let loader = makeLoader(farLink: true)
        let process = ReaderProcess(pid: 9, startTime: 1, name: "ffmpeg", arguments: "", parentName: "")
        let pattern = ReadPattern(.player, account: ReaderBook().opened(by: process, as: .play, file: "/long.mp4"))
        loader.attach(pattern)
        _ = try read(loader, at: 0, count: 128 << 10, pattern: pattern)
        let ahead = try XCTUnwrap(longGets.first, "\(fetcher.gets.map { $0.range! })")
        XCTAssertTrue(fetcher.waitUntil { $0.isHeld(ahead.id) }, "held at its allowance")
        XCTAssertTrue(fetcher.waitUntil { $0.gets.filter { $0.id != ahead.id }.allSatisfy(\.finished) })
        let delivered = fetcher.gets.reduce(0) { $0 + $1.delivered }
        XCTAssertGreaterThan(try XCTUnwrap(fetcher.record(ahead.id)).delivered, 0)
        XCTAssertEqual(pattern.account?.bytesFetched, delivered, "the stream's bytes were no one's")
        loader.release(pattern)
    }

    func testAPlayersSeekToBytesNothingBringsStopsTheStreamWithAtMostItsHoldFetched() throws {
        let source = content(Int(32 * Self.mib))
        let loader = makeLoader(farLink: true)
        let pattern = ReadPattern()
        _ = try read(loader, at: 0, count: 128 << 10, pattern: pattern)
        let ahead = try XCTUnwrap(longGets.first)
        XCTAssertTrue(fetcher.waitUntil { $0.isHeld(ahead.id) }, "held at its allowance")
        let at = 20 * Self.mib
        XCTAssertEqual(try read(loader, at: at, count: 128 << 10, pattern: pattern),
                       Array(source[Int(at)..<Int(at) + (128 << 10)]))
        XCTAssertTrue(fetcher.waitUntil { $0.record(ahead.id)?.finished == true }, "the seek stopped the stream")
        XCTAssertTrue(fetcher.cancelled.contains(ahead.id))
        XCTAssertLessThanOrEqual(try XCTUnwrap(fetcher.record(ahead.id)).delivered,
                                 ReadPattern.linkStart + fetcher.chunkSize)
        assertNoByteFetchedTwice()
    }

    func testAPlayersDetourToBytesPresentOrOnTheirWayKeepsTheStream() throws {
        let source = content(Int(32 * Self.mib))
        let loader = makeLoader(farLink: true)
        let pattern = ReadPattern()
        _ = try read(loader, at: 0, count: 128 << 10, pattern: pattern)
        let ahead = try XCTUnwrap(longGets.first, "\(fetcher.gets.map { $0.range! })")
        XCTAssertEqual(ahead.range?.lowerBound, 128 * Self.kib)
        try assertADetourToTheIndexKeeps(ahead, loader, source, pattern: pattern)
    }

    func testAScansFirstReadAndAPlayersFirstReadFarIntoTheFileStartNoStream() throws {
        _ = content(Int(32 * Self.mib))
        let loader = makeLoader(farLink: true)
        _ = try read(loader, at: 0, count: 128 << 10, pattern: ReadPattern(readClass: .scan))
        _ = try read(loader, at: 8 * Self.mib, count: 128 << 10, pattern: ReadPattern())
        XCTAssertEqual(fetcher.gets.count, 2, "\(fetcher.gets.map { $0.range! })")
        XCTAssertTrue(longGets.isEmpty)
        XCTAssertEqual(streamsAhead(loader), 0)
    }

    /// A listed file's first read is the link's first answer: its head's
    /// answer, telling the link far, starts the stream past the read
    /// (decision 0058); one telling it near starts none.
    func testAFirstReadOverALinkNotYetKnownStartsItsStreamWhenTheHeadsAnswerTellsItFar() throws {
        let loader = try firstReadOverAnUnknownLink(answering: 0.05)
        XCTAssertTrue(fetcher.waitUntil { _ in !self.longGets.isEmpty }, "\(fetcher.gets.map { $0.range! })")
        // Past the head its first request asks for (a lookup's 512 KiB).
        let head = try XCTUnwrap(fetcher.gets.first?.range)
        XCTAssertEqual(longGets.first?.range, head.upperBound..<(32 * Self.mib))
        XCTAssertEqual(streamsAhead(loader), 1)
    }

    func testAFirstReadOverALinkNotYetKnownStartsNoStreamWhenTheHeadsAnswerTellsItNear() throws {
        let loader = try firstReadOverAnUnknownLink(answering: 0.001)
        XCTAssertEqual(fetcher.gets.count, 1, "\(fetcher.gets.map { $0.range! })")
        XCTAssertEqual(streamsAhead(loader), 0)
    }

    /// A player's first 128 KiB at byte 0 through a loader that knows no
    /// round trip yet, every answer telling `roundTrip`.
    private func firstReadOverAnUnknownLink(answering roundTrip: Double) throws -> FileLoader {
        _ = content(Int(32 * Self.mib))
        fetcher.setAnswerRoundTrip(roundTrip)
        var settings = LoaderSettings()
        settings.timeout = 10
        settings.tailStretch = 0
        settings.link = LinkEstimate()
        let loader = FileLoader(source: Source(name: "long.mp4", url: url), store: store, fetcher: fetcher,
                                settings: settings)
        let pattern = ReadPattern()
        loader.attach(pattern)
        _ = try read(loader, at: 0, count: 128 << 10, pattern: pattern)
        XCTAssertEqual(fetcher.gets.first?.range?.lowerBound, 0, "the head first")
        return loader
    }

    /// `ffmpeg -ss 40 -i`: it reads the head and the index, then seeks
    /// (decision 0059).
    func testAFirstReadAtTheStartOfAPlayerAskedToStartElsewhereStartsNoStream() throws {
        _ = content(Int(32 * Self.mib))
        let loader = makeLoader(farLink: true)
        _ = try read(loader, at: 0, count: 128 << 10, pattern: ReadPattern(startsElsewhere: true))
        XCTAssertEqual(fetcher.gets.count, 1, "\(fetcher.gets.map { $0.range! })")
        XCTAssertTrue(longGets.isEmpty)
        XCTAssertEqual(streamsAhead(loader), 0)
    }

    /// `head -c 4096`: the kernel reads 16 KiB; a demuxer's 32 KiB reads
    /// become 64 KiB ones.
    func testAPlayersSmallFirstReadStartsNoStream() throws {
        _ = content(Int(32 * Self.mib))
        let loader = makeLoader(farLink: true)
        _ = try read(loader, at: 0, count: 16 << 10, pattern: ReadPattern())
        XCTAssertEqual(fetcher.gets.count, 1, "\(fetcher.gets.map { $0.range! })")
        XCTAssertEqual(streamsAhead(loader), 0)
    }

    /// Near (loopback, a LAN) a request costs little: no stream ahead.
    func testAPlayersFirstReadOverALinkNotKnownFarStartsNoStream() throws {
        _ = content(Int(32 * Self.mib))
        let loader = makeLoader()
        _ = try read(loader, at: 0, count: 128 << 10, pattern: ReadPattern())
        XCTAssertEqual(fetcher.gets.count, 1, "\(fetcher.gets.map { $0.range! })")
        XCTAssertEqual(streamsAhead(loader), 0)
    }

    func testAReadAtATransferInsideALongOnesRangeCutsTheLongOneThere() throws {
        let length = 32 * Self.mib
        let source = content(Int(length))
        let loader = makeLoader()
        _ = try streamUntilHeld(loader, source, pattern: ReadPattern())
        // Another handle far ahead, past the join distance: its own transfer,
        // and the long one may not run on into its bytes.
        let far = 24 * Self.mib
        XCTAssertEqual(try read(loader, at: far, count: 64 << 10, pattern: ReadPattern()),
                       Array(source[Int(far)..<Int(far) + (64 << 10)]))
        let pattern = ReadPattern()
        try stream(loader, source, from: 0, count: length, pattern: pattern)
        assertNoByteFetchedTwice()
        XCTAssertEqual(fetcher.gets.reduce(0) { $0 + $1.delivered }, length)
    }
}
