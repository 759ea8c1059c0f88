// What a remount reads a VOD from with its server gone: the documents
// saved as fetched and the segment lengths learned, each a miss when it is
// another URL's, of other parts, damaged or out of bounds.
import Foundation
import XCTest
@testable import MediaStore
@testable import MediaSupport
@testable import MediaTestSupport

final class SavedDocumentTests: XCTestCase {
    private var base = ""

    override func setUpWithError() throws {
        base = FileManager.default.temporaryDirectory.appendingPathComponent("mediafs-documents-\(UUID())").path
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: base)
    }

    private let url = "https://u:p@a.example/vod/index.m3u8"

    func testADocument_roundTrips_andIsAnotherURLsMiss() throws {
        let store = try CacheStore(root: base)
        XCTAssertNil(store.loadDocument(url: url))
        let text = "#EXTM3U\n#EXT-X-ENDLIST\nÜ\ttab\r\n"
        try store.saveDocument(url: url, text: text)
        XCTAssertEqual(store.loadDocument(url: url), text)
        XCTAssertNil(store.loadDocument(url: "https://a.example/vod/other.m3u8"))
        try store.saveDocument(url: url, text: "second")
        XCTAssertEqual(store.loadDocument(url: url), "second", "the last saved replaces the one before")
    }

    func testAFileUnderTheURLsNameThatIsNotItsCopy_isAMiss() throws {
        let store = try CacheStore(root: base)
        try store.saveDocument(url: url, text: "x")
        let path = base + "/documents/" + SHA256.hex(url)
        try Data("mediafs-document 1\thttps://evil.example/\nx".utf8).write(to: URL(fileURLWithPath: path))
        XCTAssertNil(store.loadDocument(url: url))
        try Data("mediafs-document 2\t\(url)\nx".utf8).write(to: URL(fileURLWithPath: path))
        XCTAssertNil(store.loadDocument(url: url), "another version")
    }

    func testSegmentLengths_areThoseOfTheSameParts_andBounded() throws {
        let store = try CacheStore(root: base)
        try store.saveSegmentLengths(url: url, digest: "abc", lengths: [1000, 0, 700])
        XCTAssertEqual(store.loadSegmentLengths(url: url, digest: "abc", count: 3), [1000, 0, 700])
        XCTAssertNil(store.loadSegmentLengths(url: url, digest: "abd", count: 3), "other parts")
        XCTAssertNil(store.loadSegmentLengths(url: url, digest: "abc", count: 4), "another count")
        XCTAssertNil(store.loadSegmentLengths(url: "https://a.example/x.m3u8", digest: "abc", count: 3))
        let path = base + "/segment-lengths/" + SHA256.hex(url)
        for hostile in ["-1,2,3", "1,2,\(Int64.max)", "1,,3", "1,2,99999999999999999999", "1,2,x"] {
            try Data("mediafs-segment-lengths 1\t\(url)\nabc\n\(hostile)".utf8).write(to: URL(fileURLWithPath: path))
            XCTAssertNil(store.loadSegmentLengths(url: url, digest: "abc", count: 3), hostile)
        }
    }
}
