// The admin listener's answers and the status page's document, without a
// mount: the integration test loads the page through a real mount in a
// real browser.
import Foundation
import XCTest
@testable import MediaCache
@testable import MediaSources
@testable import MediaStore
@testable import MediaSupport
@testable import MediaTestSupport

final class AdminListenerTests: XCTestCase {
    private var base = ""
    private var fetcher = FakeFetcher()

    override func setUpWithError() throws {
        base = FileManager.default.temporaryDirectory.appendingPathComponent("mediafs-admin-\(UUID())").path
        fetcher = FakeFetcher()
    }

    override func tearDownWithError() throws {
        fetcher.shutdown()
        try? FileManager.default.removeItem(atPath: base)
    }

    private func catalog(_ sources: [Source]) throws -> Catalog {
        Catalog(sources: sources, store: try CacheStore(root: base), fetcher: fetcher, settings: LoaderSettings())
    }

    private func answer(_ method: String, _ path: String, _ catalog: Catalog?) -> AdminListener.Answer {
        AdminListener.answer(method: method, path: path, catalog: catalog, exposition: MetricsExposition())
    }

    func testThePagePathsAnswerAndAnythingElseIsRefused() throws {
        let c = try catalog([Source(name: "a.mp4", url: "https://a.example/a.mp4")])
        let page = answer("GET", "/", c)
        XCTAssertEqual(page.status, 200)
        XCTAssertEqual(page.contentType, "text/html; charset=utf-8")
        let html = String(decoding: page.body, as: UTF8.self)
        XCTAssertTrue(html.contains("fetch(\"/status.json\""))
        XCTAssertFalse(html.contains("http://") || html.contains("https://"), "the page loads nothing from elsewhere")
        XCTAssertEqual(answer("HEAD", "/", c).status, 200)
        XCTAssertEqual(answer("GET", "/status.json", c).contentType, "application/json")
        XCTAssertEqual(answer("GET", "/metrics", c).contentType, MetricsExposition.contentType)
        XCTAssertEqual(answer("GET", "/other", c).status, 404)
        let post = answer("POST", "/", c)
        XCTAssertEqual(post.status, 405)
        XCTAssertEqual(post.allow, "GET, HEAD")
        XCTAssertEqual(answer("GET", "/", nil).status, 503, "a stopping mount serves nothing")
    }

    func testTheDocumentHoldsTheCommandsFiguresAndTheFilesInUseWithTheirRanges() throws {
        let bytes = (0..<100_000).map { UInt8($0 % 251) }
        fetcher.add("https://a.example/a.mp4", bytes: bytes)
        fetcher.add("https://a.example/b.mp4", bytes: bytes)
        let c = try catalog([Source(name: "a.mp4", url: "https://a.example/a.mp4"),
                             Source(name: "b.mp4", url: "https://a.example/b.mp4")])
        let opened = try c.open("/a.mp4", flags: O_RDONLY, reader: .player)
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = try buffer.withUnsafeMutableBytes { try opened.loader.read(into: $0, at: 50_000, pattern: opened.pattern) }
        XCTAssertEqual(n, 4096)
        _ = try c.file(at: "/b.mp4")  // a loader, but no handle: not in use
        // The read's transfer runs on past the read: the document is taken
        // once it ended, or the two snapshots below could differ.
        XCTAssertTrue(fetcher.waitUntil { $0.gets.allSatisfy(\.finished) })

        let text = String(decoding: answer("GET", "/status.json", c).body, as: UTF8.self)
        let document = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        func parsed(_ json: String) throws -> NSObject { try JSONSerialization.jsonObject(with: Data(json.utf8)) as! NSObject }
        XCTAssertEqual(document["readers"] as? NSObject, try parsed(c.readersJSON()))
        XCTAssertEqual(document["sources"] as? NSObject, try parsed(c.sourcesJSON()))
        XCTAssertEqual(document["totals"] as? NSObject, try parsed(c.statsJSON()))
        let files = try XCTUnwrap(document["files"] as? [[String: Any]])
        XCTAssertEqual(files.map { $0["name"] as? String }, ["/a.mp4"])
        let file = files[0]
        let status = opened.loader.status()
        XCTAssertEqual((file["cached_bytes"] as? NSNumber)?.int64Value, status.cachedBytes)
        XCTAssertEqual((file["size"] as? NSNumber)?.int64Value, 100_000)
        XCTAssertEqual(file["cached_ranges"] as? [[Int64]], status.present.ranges.map { [$0.lowerBound, $0.upperBound] })
        XCTAssertTrue((file["cached_ranges"] as? [[Int64]])?.contains { $0[0] <= 50_000 && $0[1] >= 54_096 } == true)
        XCTAssertEqual(file["open_handles"] as? Int, 1)
        XCTAssertEqual(document["files_in_use"] as? Int, 1)
        c.release(opened.pattern, of: opened.loader)
    }

    func testManyRangesAreDrawnAtMostAFewHundredClosingTheThinnestGapsFirst() {
        // 600 ranges 1 KiB apart on a 10 MB file: gaps below 10 kB close into one.
        var close = ByteRangeSet()
        for i in 0..<600 { close.insert(Int64(i) * 2048..<Int64(i) * 2048 + 1024) }
        let merged = StatusDocument.drawn(close, size: 10_000_000)
        XCTAssertEqual(merged.ranges, [[0, 599 * 2048 + 1024]])
        XCTAssertFalse(merged.cut)
        // 600 ranges 100 kB apart: nothing closes, the first 256 are kept.
        var far = ByteRangeSet()
        for i in 0..<600 { far.insert(Int64(i) * 100_000..<Int64(i) * 100_000 + 10) }
        let cut = StatusDocument.drawn(far, size: 60_000_000)
        XCTAssertEqual(cut.ranges.count, StatusDocument.rangesPerFile)
        XCTAssertTrue(cut.cut)
        XCTAssertEqual(cut.ranges.first, [0, 10])
        // A few ranges are given as they are.
        let few = StatusDocument.drawn(ByteRangeSet([0..<10, 20..<30]), size: 100)
        XCTAssertEqual(few.ranges, [[0, 10], [20, 30]])
        XCTAssertFalse(few.cut)
    }
}
