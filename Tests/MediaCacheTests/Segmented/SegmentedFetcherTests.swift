// SegmentedFetcher over a FakeFetcher: a range of a VOD's file becomes
// ranged GETs on exactly the segments it covers, streamed in order under
// one made-up 206 head; lengths a playlist does not give are learned once;
// a HEAD, a range past the end and a stale If-Range are answered without a
// segment GET; a segment's failure reaches the reader as its status.
import XCTest
@testable import MediaCache
@testable import MediaSources
@testable import MediaSegmented
#if canImport(Glibc)
import Glibc
@testable import MediaNetwork
@testable import MediaStore
@testable import MediaSupport
@testable import MediaTestSupport
#endif

final class SegmentedFetcherTests: XCTestCase {
    private final class Collector: TransferDelegate, @unchecked Sendable {
        private let condition = NSCondition()
        private(set) var heads: [ResponseHead] = []
        private(set) var body: [UInt8] = []
        private(set) var completion: MediaError??
        var stopAfter = Int.max

        func transfer(_ id: TransferID, receiveHead head: ResponseHead) -> Bool {
            condition.withLock { heads.append(head) }
            return true
        }

        func transfer(_ id: TransferID, receiveBody bytes: UnsafeRawBufferPointer) -> Bool {
            condition.withLock {
                body += bytes
                return body.count < stopAfter
            }
        }

        func transfer(_ id: TransferID, completeWith error: MediaError?) {
            condition.withLock {
                completion = .some(error)
                condition.broadcast()
            }
        }

        /// The transfer's end, once it came.
        func end(timeout: Double = 10) -> MediaError?? {
            condition.withLock {
                let deadline = Date(timeIntervalSinceNow: timeout)
                while completion == nil, condition.wait(until: deadline) {}
                return completion
            }
        }
    }

    private let url = "http://h.example/v/index.m3u8"
    private var fake: FakeFetcher!
    /// Three segments of 1000, 1500 and 700 bytes.
    private var segments: [[UInt8]] = []

    override func setUp() {
        fake = FakeFetcher(chunkSize: 256)
        segments = [1000, 1500, 700].enumerated().map { index, count in
            (0..<count).map { UInt8(truncatingIfNeeded: $0 * 7 + index * 31) }
        }
        for (index, bytes) in segments.enumerated() { fake.add("http://h.example/v/s\(index).ts", bytes: bytes) }
        var single = FakeFetcher.Resource(bytes: segments.flatMap { $0 })
        single.etag = nil
        fake.add("http://h.example/v/all.ts", single)
    }

    override func tearDown() {
        fake.shutdown()
    }

    private func vod(byteRanges: Bool) -> SegmentedVOD {
        var offset: Int64 = 0
        let parts = segments.indices.map { index -> SegmentedVOD.Part in
            guard byteRanges else { return .init(url: "http://h.example/v/s\(index).ts", range: nil) }
            defer { offset += Int64(segments[index].count) }
            return .init(url: "http://h.example/v/all.ts", range: offset..<(offset + Int64(segments[index].count)))
        }
        return SegmentedVOD(url: url, parts: parts, contentType: "video/mp2t")
    }

    private func fetch(_ fetcher: SegmentedFetcher, _ request: FetchRequest, stopAfter: Int = .max) -> Collector {
        let collector = Collector()
        collector.stopAfter = stopAfter
        fetcher.start(request, delegate: collector)
        XCTAssertTrue(collector.end() != nil, "the transfer ended")
        return collector
    }

    func testPieces_mapARangeOntoTheCoveredParts_skippingEmptyOnes() throws {
        let vod = SegmentedVOD(url: url, parts: (0..<4).map { .init(url: "http://h.example/\($0)", range: nil) },
                               contentType: "video/mp2t")
        let layout = try vod.layout(lengths: [10, 0, 20, 5])
        typealias Piece = SegmentedVOD.Layout.Piece
        XCTAssertEqual(layout.pieces(of: 0..<35), [Piece(part: 0, range: 0..<10), Piece(part: 2, range: 0..<20),
                                                  Piece(part: 3, range: 0..<5)])
        XCTAssertEqual(layout.pieces(of: 9..<11), [Piece(part: 0, range: 9..<10), Piece(part: 2, range: 0..<1)])
        XCTAssertEqual(layout.pieces(of: 10..<30), [Piece(part: 2, range: 0..<20)])
        XCTAssertEqual(layout.pieces(of: 34..<100), [Piece(part: 3, range: 4..<5)])
        XCTAssertEqual(layout.pieces(of: 35..<40), [])
    }

    func testARangeAcrossSegments_isOne206OfTheFile_fromRangedGETsOnTheCoveredSegmentsOnly() throws {
        let fetcher = SegmentedFetcher(clock: .system, base: fake, vods: [vod(byteRanges: true)])
        let whole = segments.flatMap { $0 }
        let collector = fetch(fetcher, FetchRequest(url: url, range: 900..<2600))
        XCTAssertNil(collector.end()!, "success")
        XCTAssertEqual(collector.heads.count, 1)
        XCTAssertEqual(collector.heads.first?.status, 206)
        XCTAssertEqual(collector.heads.first?.contentRange?.range, 900..<2600)
        XCTAssertEqual(collector.heads.first?.contentRange?.total, 3200)
        XCTAssertEqual(collector.heads.first?.contentType, "video/mp2t")
        XCTAssertEqual(collector.body, Array(whole[900..<2600]))
        XCTAssertEqual(fake.allRecords.map(\.range), [900..<1000, 1000..<2500, 2500..<2600])
        XCTAssertEqual(fake.heads.count, 0, "byte ranges give the lengths")
    }

    func testUnlistedLengths_areLearnedOnce_thenRangesOfEachSegmentAreAskedFor() throws {
        let fetcher = SegmentedFetcher(clock: .system, base: fake, vods: [vod(byteRanges: false)])
        let head = fetch(fetcher, FetchRequest(url: url, method: .head))
        XCTAssertEqual(head.heads.first?.contentLength, 3200)
        XCTAssertEqual(head.heads.first?.etag?.hasPrefix("\"vod-"), true)
        XCTAssertEqual(fake.heads.count, 3)
        let read = fetch(fetcher, FetchRequest(url: url, range: 1200..<2700, ifRange: head.heads.first?.etag))
        XCTAssertEqual(read.heads.first?.status, 206)
        XCTAssertEqual(read.body, Array(segments.flatMap { $0 }[1200..<2700]))
        XCTAssertEqual(fake.heads.count, 3, "lengths are learned once")
        XCTAssertEqual(fake.gets.map(\.request.url), ["http://h.example/v/s1.ts", "http://h.example/v/s2.ts"])
        XCTAssertEqual(fake.gets.map(\.range), [200..<1500, 0..<200])
    }

    func testPartOffsets_areTheLayoutsOnceSized_andNoneForOtherURLs() throws {
        let fetcher = SegmentedFetcher(clock: .system, base: fake, vods: [vod(byteRanges: false)])
        XCTAssertNil(fetcher.partOffsets(of: url), "not sized yet, and asking does not size")
        XCTAssertEqual(fake.heads.count, 0)
        _ = fetch(fetcher, FetchRequest(url: url, method: .head))
        XCTAssertEqual(fetcher.partOffsets(of: url), [0, 1000, 2500, 3200])
        XCTAssertNil(fetcher.partOffsets(of: "http://h.example/v/all.ts"))
    }

    func testAVODAListingFinds_isServedOnceRegistered_keepingItsLengthsWhileItsPartsStayTheSame() throws {
        let fetcher = SegmentedFetcher(clock: .system, base: fake, vods: [])
        XCTAssertFalse(fetcher.serves(url))
        XCTAssertEqual(fetcher.register(vod(byteRanges: false)), .new)
        XCTAssertTrue(fetcher.serves(url))
        let head = fetch(fetcher, FetchRequest(url: url, method: .head))
        XCTAssertEqual(head.heads.first?.contentLength, 3200)
        XCTAssertEqual(fake.heads.count, 3)
        XCTAssertEqual(fetcher.register(vod(byteRanges: false)), .unchanged, "the same parts again")
        XCTAssertEqual(fetcher.partOffsets(of: url), [0, 1000, 2500, 3200], "its lengths are kept")
        // Other parts: another version, sized anew, under another validator.
        let changed = SegmentedVOD(url: url, parts: [.init(url: "http://h.example/v/s2.ts", range: nil)],
                                   contentType: "video/mp2t")
        XCTAssertEqual(fetcher.register(changed), .replaced)
        XCTAssertNil(fetcher.partOffsets(of: url))
        let again = fetch(fetcher, FetchRequest(url: url, method: .head))
        XCTAssertEqual(again.heads.first?.contentLength, 700)
        XCTAssertNotEqual(again.heads.first?.etag, head.heads.first?.etag)
    }

    func testLearnedLengths_areSaved_andARemountLaysTheFileOutWithNoRequest() throws {
        let root = try TemporaryDirectory.make("segment-lengths")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let store = try CacheStore(root: root)
        let first = SegmentedFetcher(clock: .system, base: fake, vods: [vod(byteRanges: false)], store: store)
        XCTAssertEqual(fetch(first, FetchRequest(url: url, method: .head)).heads.first?.contentLength, 3200)
        XCTAssertEqual(fake.heads.count, 3)
        let again = SegmentedFetcher(clock: .system, base: fake, vods: [vod(byteRanges: false)], store: store)
        XCTAssertEqual(again.partOffsets(of: url), [0, 1000, 2500, 3200], "laid out from the saved lengths")
        XCTAssertEqual(fetch(again, FetchRequest(url: url, method: .head)).heads.first?.contentLength, 3200)
        XCTAssertEqual(fake.heads.count, 3, "no probe")
        // Other parts under the same URL do not take those lengths.
        let other = SegmentedVOD(url: url, parts: [.init(url: "http://h.example/v/s2.ts", range: nil)],
                                 contentType: "video/mp2t")
        XCTAssertNil(SegmentedFetcher(clock: .system, base: fake, vods: [other], store: store).partOffsets(of: url))
    }

    func testAPartWhoseKeyWasNotFetched_failsWithoutARequest_untilTheKeyArrives() throws {
        let iv = [UInt8](repeating: 0, count: 16)
        let encrypted = [SegmentedVOD.Part(url: "http://h.example/v/s0.ts", range: 0..<1000,
                                           encryption: .init(keyURL: "http://h.example/v/k", iv: iv))]
        let keyless = SegmentedVOD(url: url, parts: encrypted, contentType: "video/mp2t")
        let fetcher = SegmentedFetcher(clock: .system, base: fake, vods: [keyless])
        let read = fetch(fetcher, FetchRequest(url: url, range: 0..<100))
        XCTAssertEqual(read.body, [])
        guard case .some(.some(let error)) = read.completion else { return XCTFail("no error") }
        XCTAssertEqual(error.errno, ENOKEY, error.message)
        XCTAssertEqual(fake.gets.count, 0, "no cipher text asked for, none served")
        let keyed = SegmentedVOD(url: url, parts: encrypted, contentType: "video/mp2t",
                                 keys: ["http://h.example/v/k": [UInt8](repeating: 1, count: 16)])
        XCTAssertEqual(fetcher.register(keyed), .keysArrived)
        XCTAssertEqual(fetcher.register(keyed), .unchanged)
    }

    /// The same three segments as an fMP4 VOD's (each part's head is read
    /// by the demuxer's walk), or as a TS VOD's.
    private func unlisted(_ contentType: String) -> SegmentedVOD {
        SegmentedVOD(url: url, parts: segments.indices.map { .init(url: "http://h.example/v/s\($0).ts", range: nil) },
                     contentType: contentType)
    }

    func testASizingForARead_learnsEachFMP4LengthWithItsHead_andReadsOfTheHeadsAskForNothingMore() throws {
        let fetcher = SegmentedFetcher(clock: .system, base: fake, vods: [unlisted("video/mp4")])
        let whole = segments.flatMap { $0 }
        let first = fetch(fetcher, FetchRequest(url: url, range: 0..<100))
        XCTAssertEqual(first.body, Array(whole[0..<100]))
        XCTAssertEqual(fake.heads.count, 0, "no HEAD: the ranged GETs gave the lengths")
        XCTAssertEqual(fake.gets.map(\.range), Array(repeating: 0..<Int64(SegmentSizer.headBytes), count: 3),
                       "one GET a part, for its head; the read's 100 bytes came from the first")
        XCTAssertEqual(fetcher.partOffsets(of: url), [0, 1000, 2500, 3200])
        // The walk's reads at each later part's start, and one across two.
        XCTAssertEqual(fetch(fetcher, FetchRequest(url: url, range: 1000..<1400)).body, Array(whole[1000..<1400]))
        XCTAssertEqual(fetch(fetcher, FetchRequest(url: url, range: 2500..<3200)).body, Array(whole[2500..<3200]))
        XCTAssertEqual(fake.gets.count, 3, "the heads were served from memory")
        XCTAssertEqual(fetcher.keptHeadBytes, 900 + 1100, "what the reads left of the first two heads")
        // A read that goes on where one ended takes what it left.
        XCTAssertEqual(fetch(fetcher, FetchRequest(url: url, range: 100..<1000)).body, Array(whole[100..<1000]))
        XCTAssertEqual(fake.gets.count, 3)
        // Taken: the same range again goes to the segment.
        XCTAssertEqual(fetch(fetcher, FetchRequest(url: url, range: 1000..<1400)).body, Array(whole[1000..<1400]))
        XCTAssertEqual(fake.gets.last?.range, 0..<400)
    }

    func testAHeadShorterThanThePiece_isServedThenTheRestAskedOfItsSegment() throws {
        segments[1] = (0..<(SegmentSizer.headBytes + 5000)).map { UInt8(truncatingIfNeeded: $0 * 13) }
        fake.add("http://h.example/v/s1.ts", bytes: segments[1])
        let fetcher = SegmentedFetcher(clock: .system, base: fake, vods: [unlisted("video/mp4")])
        let whole = segments.flatMap { $0 }
        let read = fetch(fetcher, FetchRequest(url: url, range: 900..<Int64(whole.count)))
        XCTAssertNil(read.end()!, "success")
        XCTAssertEqual(read.body, Array(whole[900...]))
        XCTAssertEqual(Array(fake.gets.map(\.range).dropFirst(3)), [Int64(SegmentSizer.headBytes)..<Int64(segments[1].count)],
                       "the first part's end from within its head, the long one's rest past its head")
        // A read from within a head past its end: what is left of the
        // head, then the segment from where it ends.
        let again = SegmentedFetcher(clock: .system, base: fake, vods: [unlisted("video/mp4")])
        let gets = fake.gets.count
        XCTAssertEqual(fetch(again, FetchRequest(url: url, range: 0..<10)).body, Array(whole[0..<10]))
        let inside = 1000 + Int64(SegmentSizer.headBytes) - 100
        let across = fetch(again, FetchRequest(url: url, range: inside..<(inside + 1000)))
        XCTAssertEqual(across.body, Array(whole[Int(inside)..<Int(inside + 1000)]))
        XCTAssertEqual(fake.gets.dropFirst(gets + 3).map(\.range), [Int64(SegmentSizer.headBytes)..<Int64(SegmentSizer.headBytes + 900)],
                       "100 bytes from the head, 900 from the segment")
    }

    func testAStatsSizing_keepsNoHeads_andATSVODsReadKeepsOnlyItsFirstPartsHead() throws {
        let stat = SegmentedFetcher(clock: .system, base: fake, vods: [unlisted("video/mp4")])
        XCTAssertEqual(fetch(stat, FetchRequest(url: url, method: .head)).heads.first?.contentLength, 3200)
        XCTAssertEqual(fake.heads.count, 3)
        XCTAssertEqual(fake.gets.count, 0, "a stat fetches none of the file's bytes")
        XCTAssertEqual(stat.keptHeadBytes, 0)

        let ts = SegmentedFetcher(clock: .system, base: fake, vods: [unlisted("video/mp2t")])
        XCTAssertEqual(fetch(ts, FetchRequest(url: url, range: 0..<100)).body, Array(segments[0][0..<100]))
        XCTAssertEqual(fake.heads.map(\.request.url).suffix(2), ["http://h.example/v/s1.ts", "http://h.example/v/s2.ts"],
                       "a TS file's later parts: their lengths only")
        XCTAssertEqual(fake.gets.map(\.range), [0..<Int64(SegmentSizer.headBytes)], "its first part's head")
    }

    func testAServerThatIgnoresRange_givesTheLengthItsAnswerSays_andTheHeadIsCut() throws {
        for index in segments.indices { fake.update("http://h.example/v/s\(index).ts") { $0.ignoresRange = true } }
        let fetcher = SegmentedFetcher(clock: .system, base: fake, vods: [unlisted("video/mp4")])
        let read = fetch(fetcher, FetchRequest(url: url, range: 0..<3200))
        XCTAssertEqual(read.body, segments.flatMap { $0 }, "its lengths from Content-Length, its bytes the heads")
        XCTAssertEqual(fetcher.partOffsets(of: url), [0, 1000, 2500, 3200])
        XCTAssertEqual(fake.gets.count, 3)
    }

    func testAFailedHeadRead_fallsBackToAHEAD() throws {
        fake.update("http://h.example/v/s1.ts") { $0.getStatus = 403 }
        let fetcher = SegmentedFetcher(clock: .system, base: fake, vods: [unlisted("video/mp4")])
        _ = fetch(fetcher, FetchRequest(url: url, range: 0..<100))
        XCTAssertEqual(fetcher.partOffsets(of: url), [0, 1000, 2500, 3200])
        XCTAssertEqual(fake.heads.map(\.request.url), ["http://h.example/v/s1.ts"])
    }

    func testKeptHeads_areTakenOncePieceByPiece_forTheirLength_droppedPastTheirLife_oldestFirstOverTheBudget() {
        let time = TestClock()
        let heads = SegmentHeads(clock: time.clock)
        heads.keep(url: "a", length: 10, bytes: [0, 1, 2, 3, 4, 5])
        XCTAssertEqual(heads.take(url: "a", length: 10, from: 2, count: 2), [2, 3], "a read within the head")
        XCTAssertEqual(heads.take(url: "a", length: 10, from: 0, count: 100), [0, 1], "the bytes before it")
        XCTAssertNil(heads.take(url: "a", length: 10, from: 2, count: 1), "taken once")
        XCTAssertEqual(heads.keptBytes, 2)
        XCTAssertNil(heads.take(url: "a", length: 11, from: 4, count: 1), "another length: another version")
        XCTAssertNil(heads.take(url: "a", length: 10, from: 4, count: 1), "dropped with the mismatch")
        heads.keep(url: "b", length: 10, bytes: [1, 2, 3])
        time.advance(SegmentHeads.life + 1)
        XCTAssertNil(heads.take(url: "b", length: 10, from: 0, count: 3), "past its life")
        XCTAssertEqual(heads.keptBytes, 0)
        let big = [UInt8](repeating: 7, count: SegmentHeads.budget / 2)
        heads.keep(url: "c", length: Int64(big.count), bytes: big)
        heads.keep(url: "d", length: Int64(big.count), bytes: big)
        heads.keep(url: "e", length: 4, bytes: [9, 9, 9, 9])
        XCTAssertLessThanOrEqual(heads.keptBytes, SegmentHeads.budget)
        XCTAssertNil(heads.take(url: "c", length: Int64(big.count), from: 0, count: 1), "the oldest went first")
        XCTAssertEqual(heads.take(url: "e", length: 4, from: 0, count: 4), [9, 9, 9, 9])
        XCTAssertEqual(heads.take(url: "d", length: Int64(big.count), from: 0, count: Int64(big.count))?.count, big.count)
    }

    func testThePartHoldingAnOffset_isFoundByItsStart() {
        let offsets: [Int64] = [0, 1000, 2500, 2500, 3200]
        XCTAssertEqual(FileLoader.part(containing: 0, in: offsets), 0)
        XCTAssertEqual(FileLoader.part(containing: 999, in: offsets), 0)
        XCTAssertEqual(FileLoader.part(containing: 1000, in: offsets), 1)
        XCTAssertEqual(FileLoader.part(containing: 2499, in: offsets), 1)
        // An empty part holds nothing: 2500 is the next one's.
        XCTAssertEqual(FileLoader.part(containing: 2500, in: offsets), 3)
        XCTAssertEqual(FileLoader.part(containing: 3199, in: offsets), 3)
        XCTAssertEqual(FileLoader.part(containing: 5000, in: offsets), 3, "past the end: the last")
    }

    func testAStaleIfRange_isAnsweredWithTheWholeFile_andARangePastTheEndWith416() throws {
        let fetcher = SegmentedFetcher(clock: .system, base: fake, vods: [vod(byteRanges: true)])
        let stale = fetch(fetcher, FetchRequest(url: url, range: 100..<200, ifRange: "\"old\""))
        XCTAssertEqual(stale.heads.first?.status, 200)
        XCTAssertEqual(stale.body, segments.flatMap { $0 })
        let past = fetch(fetcher, FetchRequest(url: url, range: 3200..<3300))
        XCTAssertEqual(past.heads.first?.status, 416)
        XCTAssertEqual(past.heads.first?.unsatisfiedRangeTotal, 3200)
        XCTAssertEqual(past.body, [])
        XCTAssertEqual(fake.gets.count, 3, "the 416 needed no request")
    }

    func testAMissingSegment_reachesTheReaderAsItsStatus() throws {
        fake.update("http://h.example/v/s1.ts") { $0.status = 404 }
        let fetcher = SegmentedFetcher(clock: .system, base: fake, vods: [vod(byteRanges: false)])
        let lengths = fetch(fetcher, FetchRequest(url: url, range: 0..<10))
        XCTAssertTrue(lengths.heads.isEmpty)
        XCTAssertEqual(lengths.end()??.errno, ENOENT, "the length of segment 2 cannot be learned")
    }

    func testASegmentThatChangedLength_failsTheRead_neverServesShortBytes() throws {
        let fetcher = SegmentedFetcher(clock: .system, base: fake, vods: [vod(byteRanges: false)])
        XCTAssertEqual(fetch(fetcher, FetchRequest(url: url, method: .head)).heads.first?.contentLength, 3200)
        fake.update("http://h.example/v/s1.ts") { $0.bytes = Array($0.bytes.prefix(600)) }
        let read = fetch(fetcher, FetchRequest(url: url, range: 0..<3200))
        XCTAssertEqual(read.heads.first?.status, 206)
        XCTAssertEqual(read.end()??.errno, EIO)
        XCTAssertLessThanOrEqual(read.body.count, 1600)
        XCTAssertEqual(read.body, Array(segments.flatMap { $0 }.prefix(read.body.count)))
    }

    func testADelegateThatStops_endsTheTransfer_withoutAskingForLaterSegments() throws {
        let fetcher = SegmentedFetcher(clock: .system, base: fake, vods: [vod(byteRanges: true)])
        let read = fetch(fetcher, FetchRequest(url: url, range: 0..<3200), stopAfter: 300)
        XCTAssertEqual(read.end()??.errno, ECANCELED)
        XCTAssertEqual(fake.gets.count, 1)
    }

    func testOtherURLs_goToTheFetcherBeneath() throws {
        let fetcher = SegmentedFetcher(clock: .system, base: fake, vods: [vod(byteRanges: true)])
        let read = fetch(fetcher, FetchRequest(url: "http://h.example/v/s2.ts", range: 0..<100))
        XCTAssertEqual(read.body, Array(segments[2].prefix(100)))
        XCTAssertEqual(fake.gets.map(\.request.url), ["http://h.example/v/s2.ts"])
    }

    func testAnArchivePartsAnswer_isItsVolumesVersion_onlyWithTheSameLengthAndETag() {
        let resource = HLSPlaylist.Part.Resource(length: 1000, etag: "W/\"v1\"", lastModified: "Thu, 01 Jan 2026 00:00:00 GMT")
        func head(_ status: Int, _ headers: [String: String]) -> ResponseHead { ResponseHead(status: status, headers: headers) }
        // Apache's ETag turns strong a second after a change: the same version.
        XCTAssertTrue(SegmentedTransfer.answer(head(206, ["content-range": "bytes 0-9/1000", "etag": "\"v1\""]), isOf: resource))
        XCTAssertFalse(SegmentedTransfer.answer(head(206, ["content-range": "bytes 0-9/1001", "etag": "\"v1\""]), isOf: resource))
        XCTAssertFalse(SegmentedTransfer.answer(head(206, ["content-range": "bytes 0-9/1000", "etag": "\"v2\""]), isOf: resource))
        XCTAssertFalse(SegmentedTransfer.answer(head(200, ["content-length": "999"]), isOf: resource))
        XCTAssertFalse(SegmentedTransfer.answer(head(206, ["content-range": "bytes 0-9/1000",
                                                           "last-modified": "Fri, 02 Jan 2026 00:00:00 GMT"]),
                                                isOf: HLSPlaylist.Part.Resource(length: 1000, etag: nil,
                                                                                lastModified: "Thu, 01 Jan 2026 00:00:00 GMT")))
        // If-Range carries a strong ETag only (a date or a weak one makes a server answer 200 for the same bytes).
        XCTAssertNil(resource.ifRange)
        XCTAssertEqual(HLSPlaylist.Part.Resource(length: 1, etag: "\"s\"", lastModified: nil).ifRange, "\"s\"")
    }

    private func member() -> SegmentedVOD {
        SegmentedVOD(url: url + "#member=film.ts", parts: vod(byteRanges: true).parts, contentType: "video/mp2t",
                     isArchiveMember: true)
    }

    func testAnArchiveMembersLongTransfer_isHeld_eachVolumeAskedOnceWithWhatIsLeftOfTheAllowance() throws {
        fake.setHolds(true)
        let member = member()
        let fetcher = SegmentedFetcher(clock: .system, base: fake, vods: [member, vod(byteRanges: true)])
        XCTAssertTrue(fetcher.holdsTransfers(of: member.url))
        XCTAssertFalse(fetcher.holdsTransfers(of: url), "an HLS VOD's segments are small: never held")
        let collector = Collector()
        var request = FetchRequest(url: member.url, range: 0..<3200)
        request.allowance = 1000
        let id = fetcher.start(request, delegate: collector)
        // The first volume's piece ends at the allowance: the next waits, unasked.
        XCTAssertTrue(fake.waitUntil { $0.allRecords.first?.finished == true })
        XCTAssertEqual(fake.allRecords.count, 1)
        fetcher.allow(id, through: 1600)
        XCTAssertTrue(fake.waitUntil { $0.allRecords.count == 2 && $0.isHeld($0.allRecords[1].id) })
        XCTAssertEqual(fake.allRecords[1].request.allowance, 600, "what is left of the allowance")
        fetcher.allow(id, through: 3200)
        XCTAssertNil(collector.end()!, "success")
        XCTAssertEqual(collector.body, segments.flatMap { $0 })
        XCTAssertEqual(fake.allRecords.map(\.range), [0..<1000, 1000..<2500, 2500..<3200], "one request a volume")
        XCTAssertNil(fake.allRecords[2].request.allowance, "the rest is allowed: not held")
    }

    func testAHeldTransferCancelledWhileItsNextPieceWaits_endsCancelled() throws {
        fake.setHolds(true)
        let member = member()
        let fetcher = SegmentedFetcher(clock: .system, base: fake, vods: [member])
        let collector = Collector()
        var request = FetchRequest(url: member.url, range: 0..<3200)
        request.allowance = 1000
        let id = fetcher.start(request, delegate: collector)
        XCTAssertTrue(fake.waitUntil { $0.allRecords.first?.finished == true })
        fetcher.cancel(id)
        XCTAssertEqual(collector.end()??.errno, ECANCELED)
        XCTAssertEqual(fake.allRecords.count, 1)
    }
}
