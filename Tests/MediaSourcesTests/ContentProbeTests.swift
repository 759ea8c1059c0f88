// Learning a URL's ContentInfo against a FakeFetcher: a listing's probe is
// a HEAD, then GET bytes=0-0 where HEAD gives no length; a lookup's is a
// ranged GET whose body is handed over; a missing file or an unreachable
// server gets no second request; the answer is reported once.
import Foundation
import XCTest
@testable import MediaSources
@testable import MediaStore
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport
#if canImport(Glibc)
import Glibc
#endif

final class ContentProbeTests: XCTestCase {
    private var fetcher: FakeFetcher!
    private let url = "https://media.example/probe.mkv"
    private let bytes = (0..<10_000).map { UInt8(truncatingIfNeeded: $0) }

    override func setUp() {
        fetcher = FakeFetcher(chunkSize: 1000)
        fetcher.add(url, bytes: bytes)
    }

    override func tearDown() {
        fetcher.shutdown()
    }

    /// Every report of one probe, in order.
    private final class Reports: @unchecked Sendable {
        private let condition = NSCondition()
        private var results: [Result<ContentInfo, MediaError>] = []

        func add(_ result: Result<ContentInfo, MediaError>) {
            condition.lock()
            results.append(result)
            condition.broadcast()
            condition.unlock()
        }

        /// The first report, waiting for it; nil on timeout.
        func first(timeout: Double = 10) -> Result<ContentInfo, MediaError>? {
            condition.lock()
            defer { condition.unlock() }
            let deadline = Date(timeIntervalSinceNow: timeout)
            while results.isEmpty && condition.wait(until: deadline) {}
            return results.first
        }

        var count: Int {
            condition.lock()
            defer { condition.unlock() }
            return results.count
        }
    }

    /// Where a handed-over body goes.
    private final class Sink: TransferDelegate, @unchecked Sendable {
        let received = Locked<(bytes: [UInt8], completed: Bool, error: MediaError?)>(([], false, nil))
        func transfer(_ id: TransferID, receiveHead head: ResponseHead) -> Bool { true }
        func transfer(_ id: TransferID, receiveBody bytes: UnsafeRawBufferPointer) -> Bool {
            received.withLock { $0.bytes += bytes }
            return true
        }
        func transfer(_ id: TransferID, completeWith error: MediaError?) {
            received.withLock { $0.completed = true; $0.error = error }
        }
    }

    private func probe(_ fetcher: Fetching, priority: FetchRequest.Priority = .probe) -> Reports {
        let reports = Reports()
        ContentProbe.start(url: url, fetcher: fetcher, clock: .system, priority: priority) { reports.add($0) }
        return reports
    }

    private func settled() {
        XCTAssertTrue(fetcher.waitUntil { $0.allRecords.allSatisfy(\.finished) })
    }

    // MARK: A listing's probe

    func testABackgroundProbe_isOneHEAD_atItsPriority_andGivesTheServersInfo() throws {
        let reports = probe(fetcher)
        let info = try XCTUnwrap(reports.first()).get()
        settled()
        XCTAssertEqual(info.length, 10_000)
        XCTAssertEqual(info.etag, "\"v1\"")
        XCTAssertEqual(info.lastModified, "Tue, 01 Oct 2024 10:00:00 GMT")
        XCTAssertEqual(info.contentType, "video/mp4")
        XCTAssertTrue(info.acceptsRanges)
        XCTAssertEqual(fetcher.allRecords.map(\.method), [.head])
        XCTAssertEqual(fetcher.heads.first?.priority, .probe)
        XCTAssertEqual(reports.count, 1)
    }

    func testAHEADWithoutALength_fallsBackToGETOfByteZero_andStopsItAfterTheHead() throws {
        let stripping = HeaderRewritingFetcher(fetcher) { request, head in
            guard request.method == .head else { return head }
            return ResponseHead(status: head.status, headers: head.headers.filter { $0.key != "content-length" })
        }
        let reports = probe(stripping)
        let info = try XCTUnwrap(reports.first()).get()
        settled()
        XCTAssertEqual(info.length, 10_000, "from the 206's Content-Range")
        XCTAssertEqual(fetcher.allRecords.map(\.method), [.head, .get])
        XCTAssertEqual(fetcher.gets.first?.range, 0..<1)
        XCTAssertEqual(fetcher.gets.first?.priority, .probe)
        XCTAssertEqual(fetcher.bodyBytesDelivered, 0, "the byte-zero GET is stopped at its head")
        XCTAssertEqual(reports.count, 1)
    }

    func testAFailingHEAD_triesGETOfByteZero_andReportsItsStatusAsAnErrno() throws {
        fetcher.update(url) { $0.status = 403 }
        let reports = probe(fetcher)
        let result = try XCTUnwrap(reports.first())
        settled()
        XCTAssertThrowsError(try result.get()) { XCTAssertEqual(($0 as? MediaError)?.errno, EACCES) }
        XCTAssertEqual(fetcher.allRecords.map(\.method), [.head, .get])
        XCTAssertEqual(reports.count, 1)
    }

    func testAMissingFile_isENOENT_withoutASecondRequest() throws {
        fetcher.update(url) { $0.status = 404 }
        let result = try XCTUnwrap(probe(fetcher).first())
        settled()
        XCTAssertThrowsError(try result.get()) { XCTAssertEqual(($0 as? MediaError)?.errno, ENOENT) }
        XCTAssertEqual(fetcher.requestCount, 1)
    }

    func testAnUnreachableServer_getsNoSecondTry_andIsEIO() throws {
        fetcher.update(url) { $0.transportError = true }
        let result = try XCTUnwrap(probe(fetcher).first())
        settled()
        XCTAssertThrowsError(try result.get()) { XCTAssertEqual(($0 as? MediaError)?.errno, EIO) }
        XCTAssertEqual(fetcher.requestCount, 1)
    }

    func testPromote_makesARunningBackgroundProbeARead() throws {
        fetcher.setChunkDelay(0)
        fetcher.hold()
        let stripping = HeaderRewritingFetcher(fetcher) { request, head in
            guard request.method == .head else { return head }
            return ResponseHead(status: head.status, headers: head.headers.filter { $0.key != "content-length" })
        }
        let reports = Reports()
        let running = ContentProbe.start(url: url, fetcher: stripping, clock: .system, priority: .probe) { reports.add($0) }
        running.promote()
        running.promote()
        fetcher.release()
        _ = try XCTUnwrap(reports.first()).get()
        settled()
        XCTAssertEqual(fetcher.promoted.count, 1, "a probe already at read priority is not promoted again")
        XCTAssertEqual(fetcher.gets.first?.priority, .read, "the next step keeps the promotion")
    }

    // MARK: A lookup's probe

    func testALookupsProbe_GETsTheFirstBytes_andHandsTheBodyOver() throws {
        let sink = Sink()
        let handed = Locked<[(ContentInfo, TransferID)]>([])
        let reports = Reports()
        ContentProbe.start(url: url, fetcher: fetcher, clock: .system, priority: .read, firstBytes: 4096,
                           handover: { info, id, _, _ in
            handed.withLock { $0.append((info, id)) }
            return sink
        }) { reports.add($0) }
        settled()
        XCTAssertTrue(fetcher.waitUntil { _ in sink.received.withLock { $0.completed } })
        XCTAssertEqual(fetcher.allRecords.map(\.method), [.get])
        XCTAssertEqual(fetcher.gets.first?.range, 0..<4096)
        XCTAssertEqual(fetcher.gets.first?.priority, .read)
        let given = handed.withLock { $0 }
        XCTAssertEqual(given.map(\.0.length), [10_000])
        XCTAssertEqual(given.map(\.1), fetcher.gets.map(\.id))
        sink.received.withLock { received in
            XCTAssertEqual(received.bytes, Array(bytes[..<4096]))
            XCTAssertNil(received.error)
        }
        XCTAssertEqual(reports.count, 0, "a handed-over answer is the handover's, not the completion's")
    }

    func testALookupsProbe_whoseHandoverRefuses_stopsTheBody() throws {
        ContentProbe.start(url: url, fetcher: fetcher, clock: .system, priority: .read, firstBytes: 4096,
                           handover: { _, _, _, _ in nil }) { _ in }
        settled()
        XCTAssertEqual(fetcher.gets.first?.stoppedByDelegate, true)
        XCTAssertEqual(fetcher.bodyBytesDelivered, 0)
    }

    func testALookupsProbe_ofAnEmptyFile_learnsItsLengthFromThe416_withoutAHEAD() throws {
        fetcher.add(url, bytes: [])
        let reports = Reports()
        ContentProbe.start(url: url, fetcher: fetcher, clock: .system, priority: .read, firstBytes: 4096,
                           handover: { _, _, _, _ in XCTFail("an empty file has no body to hand over"); return nil }) {
            reports.add($0)
        }
        let info = try XCTUnwrap(reports.first()).get()
        settled()
        XCTAssertEqual(info.length, 0)
        XCTAssertEqual(fetcher.allRecords.map(\.method), [.get])
        XCTAssertEqual(fetcher.allRecords.first?.status, 416)
    }

    // MARK: Heads to info and errors

    func testInfo_fromEachKindOfAnswer() {
        XCTAssertEqual(ContentProbe.info(from: ResponseHead(status: 206, headers: ["content-range": "bytes 0-9/500"]))?.length, 500)
        XCTAssertEqual(ContentProbe.info(from: ResponseHead(status: 206, headers: ["content-range": "bytes 0-9/500"]))?.acceptsRanges, true)
        XCTAssertEqual(ContentProbe.info(from: ResponseHead(status: 200, headers: ["content-length": "42"]))?.length, 42)
        XCTAssertEqual(ContentProbe.info(from: ResponseHead(status: 416, headers: ["content-range": "bytes */0"]))?.length, 0)
        XCTAssertNil(ContentProbe.info(from: ResponseHead(status: 200, headers: [:])), "no length")
        XCTAssertNil(ContentProbe.info(from: ResponseHead(status: 206, headers: ["content-range": "bytes 0-9/*"])))
        XCTAssertNil(ContentProbe.info(from: ResponseHead(status: 500, headers: ["content-length": "42"])))
    }

    func testError_mapsStatusesToErrnos() {
        XCTAssertEqual(ResponseHead(status: 404, headers: [:]).failure.errno, ENOENT)
        XCTAssertEqual(ResponseHead(status: 410, headers: [:]).failure.errno, ENOENT)
        XCTAssertEqual(ResponseHead(status: 401, headers: [:]).failure.errno, EACCES)
        XCTAssertEqual(ResponseHead(status: 403, headers: [:]).failure.errno, EACCES)
        XCTAssertEqual(ResponseHead(status: 503, headers: [:]).failure.errno, EIO)
        let unusable = ResponseHead(status: 200, headers: ["content-length": "lots"]).failure
        XCTAssertEqual(unusable.errno, EIO)
        XCTAssertTrue(unusable.message.contains("content-length 'lots'"), unusable.message)
    }
}
