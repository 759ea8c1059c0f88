// Named regressions for headers that once trapped the daemon, each checked at
// the parser and through a FileLoader on a first and a second mount of one
// cache: the file fails with EIO or reads right, and nothing traps.
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

final class HostileHeaderTests: XCTestCase {
    private var base = ""
    private var store: CacheStore!
    private var fetchers: [FakeFetcher] = []
    private let url = "https://media.example/hostile.mp4"
    private let bytes = (0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 8) }

    private static let hugeYear = "Sun, 06 Nov 99999999999999999 08:49:37 GMT"
    private static let int64Max = "9223372036854775807"

    override func setUpWithError() throws {
        base = try TemporaryDirectory.make("hostile")
        store = try CacheStore(root: base)
    }

    override func tearDownWithError() throws {
        for fetcher in fetchers { fetcher.shutdown() }
        try? FileManager.default.removeItem(atPath: base)
    }

    private func makeLoader(lastModified: String? = nil, rewrite: HeaderRewritingFetcher.Rewrite? = nil) -> FileLoader {
        let fake = FakeFetcher()
        fetchers.append(fake)
        var resource = FakeFetcher.Resource(bytes: bytes)
        if let lastModified { resource.lastModified = lastModified }
        fake.add(url, resource)
        var settings = LoaderSettings()
        settings.timeout = 5
        settings.maxAttempts = 2
        let fetcher: Fetching = rewrite.map { HeaderRewritingFetcher(fake, rewrite: $0) } ?? fake
        return FileLoader(source: Source(name: "hostile.mp4", url: url), store: store, fetcher: fetcher, settings: settings)
    }

    private func read(_ loader: FileLoader, at offset: Int64, count: Int) throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0xEE, count: count)
        let n = try buffer.withUnsafeMutableBytes { try loader.read(into: $0, at: offset, pattern: ReadPattern()) }
        return Array(buffer[..<n])
    }

    private func assertEIO(_ body: @autoclosure () throws -> some Any, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try body(), file: file, line: line) {
            XCTAssertEqual(($0 as? MediaError)?.errno, EIO, "\($0)", file: file, line: line)
        }
    }

    // MARK: Last-Modified with a 17-digit year

    func testHTTPDate_withSeventeenDigitYear_isUnknown() {
        XCTAssertNil(HTTPDate.seconds(Self.hugeYear))
        XCTAssertNil(HTTPDate.seconds("Sun, 06 Nov 10000 08:49:37 GMT"))
        XCTAssertNil(HTTPDate.seconds("Sun, 06 Nov 0000 08:49:37 GMT"))
        XCTAssertNil(HTTPDate.seconds("Sun, 06 Nov 1994 99999999999999999999:49:37 GMT"))
        XCTAssertEqual(HTTPDate.seconds("Sun, 06 Nov 1994 08:49:37 GMT"), 784_111_777)
    }

    func testLastModified_withSeventeenDigitYear_givesMtimeZeroAndRightBytes_onFirstMountAndAfterRemount() throws {
        let first = makeLoader(lastModified: Self.hugeYear)
        let attributes = try first.attributes()
        XCTAssertEqual(attributes.size, Int64(bytes.count))
        XCTAssertEqual(attributes.mtime, 0)
        XCTAssertEqual(try read(first, at: 100, count: 1000), Array(bytes[100..<1100]))
        first.flush()

        // The header is kept in the metadata: the next mount parses it again.
        let second = makeLoader(lastModified: Self.hugeYear)
        XCTAssertEqual(try second.contentInfo().lastModified, Self.hugeYear)
        XCTAssertEqual(try second.attributes().mtime, 0)
        XCTAssertEqual(try read(second, at: 0, count: bytes.count), bytes)
    }

    // MARK: Content-Range ending at Int64.max

    func testContentRange_endingAtInt64Max_isRefused() {
        for value in ["bytes 0-\(Self.int64Max)/*", "bytes 0-\(Limits.maxLength)/*", "bytes 0-10/\(Self.int64Max)",
                      "bytes \(Self.int64Max)-\(Self.int64Max)/*"] {
            XCTAssertNil(ResponseHead(status: 206, headers: ["content-range": value]).contentRange, value)
        }
        let largest = ResponseHead(status: 206, headers: ["content-range": "bytes 0-\(Limits.maxLength - 1)/*"])
        XCTAssertEqual(largest.contentRange?.range, 0..<Limits.maxLength)
    }

    func testContentRange_endingAtInt64Max_failsTheReadWithEIO_andARemountReadsRight() throws {
        let first = makeLoader { request, head in
            guard head.status == 206 else { return head }
            var hostile = head
            hostile.headers["content-range"] = "bytes \(request.range!.lowerBound)-\(Self.int64Max)/*"
            return hostile
        }
        XCTAssertEqual(try first.attributes().size, Int64(bytes.count))
        assertEIO(try read(first, at: 0, count: 100))
        first.flush()

        let second = makeLoader()
        XCTAssertEqual(try read(second, at: 0, count: bytes.count), bytes)
    }

    // MARK: Content-Length near Int64.max

    func testContentLength_pastTheLimit_isRefused_andTheLimitItselfAccepted() {
        for value in [Self.int64Max, "9223372036854775808", "\(Limits.maxLength + 1)", "-1", "+5", " 5", "0x10"] {
            XCTAssertNil(ResponseHead(status: 200, headers: ["content-length": value]).contentLength, value)
        }
        XCTAssertEqual(ResponseHead(status: 200, headers: ["content-length": "\(Limits.maxLength)"]).contentLength,
                       Limits.maxLength)
        XCTAssertNil(ResponseHead(status: 416, headers: ["content-range": "bytes */\(Self.int64Max)"]).unsatisfiedRangeTotal)
    }

    func testContentLength_nearInt64Max_failsGetattrWithEIONamingTheHeader_andARemountReadsRight() throws {
        let first = makeLoader { _, head in
            var hostile = head
            if head.status == 206 {
                hostile.headers["content-range"] = "bytes 0-0/\(Self.int64Max)"
            } else {
                hostile.headers["content-length"] = Self.int64Max
            }
            return hostile
        }
        XCTAssertThrowsError(try first.attributes()) {
            XCTAssertEqual(($0 as? MediaError)?.errno, EIO)
            XCTAssertTrue("\($0)".contains(Self.int64Max), "the error does not show the header: \($0)")
        }
        assertEIO(try read(first, at: 0, count: 10))
        first.flush()

        let second = makeLoader()
        XCTAssertEqual(try second.attributes().size, Int64(bytes.count))
        XCTAssertEqual(try read(second, at: 0, count: bytes.count), bytes)
    }

    // MARK: Metadata on disk

    func testStoredMetadata_withLengthOrTimesPastTheLimits_isACacheMiss() throws {
        let honest = EntryMeta(url: url, info: ContentInfo(length: 10), present: ByteRangeSet(),
                               lastAccess: 1_700_000_000, lastValidated: 1_700_000_000)
        var tooLong = honest
        tooLong.info.length = Limits.maxLength + 1
        var tooOld = honest
        tooOld.lastAccess = Int64.min
        var tooNew = honest
        tooNew.lastValidated = Int64.max
        for hostile in [tooLong, tooOld, tooNew] {
            try store.saveMeta(hostile, forKey: url)
            XCTAssertNil(store.loadMeta(forKey: url), "\(hostile)")
        }
        try store.saveMeta(honest, forKey: url)
        XCTAssertEqual(store.loadMeta(forKey: url), honest)
    }

    // MARK: Retry-After

    func testRetryAfter_isBoundedSecondsOrNil() {
        func wait(_ value: String) -> Double? {
            ResponseHead(status: 503, headers: ["retry-after": value]).retryAfterSeconds(now: Clock.system.wall())
        }
        XCTAssertEqual(wait("2"), 2)
        XCTAssertEqual(wait("0"), 0)
        XCTAssertEqual(wait(Self.int64Max), Limits.maxRetryAfter)
        XCTAssertEqual(wait(String(repeating: "9", count: 400)), Limits.maxRetryAfter)
        XCTAssertEqual(wait("Sun, 06 Nov 1994 08:49:37 GMT"), 0, "a date in the past means now")
        XCTAssertEqual(wait("Fri, 31 Dec 9999 23:59:59 GMT"), Limits.maxRetryAfter)
        for bad in ["", "-5", "1.5", "nan", "inf", "1e9", Self.hugeYear, "soon"] {
            XCTAssertNil(wait(bad), bad)
        }
        XCTAssertNil(ResponseHead(status: 503, headers: [:]).retryAfterSeconds(now: Clock.system.wall()))
    }

    /// A date is counted from the mount's clock, not the system's: a clock
    /// stepped (or a test's) moves the wait with it.
    func testRetryAfter_dateIsCountedFromTheGivenClock() {
        let head = ResponseHead(status: 503, headers: ["retry-after": "Sun, 06 Nov 1994 08:49:37 GMT"])
        XCTAssertEqual(head.retryAfterSeconds(now: 784_111_777 - 90), 90)
        XCTAssertEqual(head.retryAfterSeconds(now: 784_111_777 + 5), 0)
    }
}
