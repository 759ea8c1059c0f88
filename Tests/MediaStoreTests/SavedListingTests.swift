import Foundation
import XCTest
@testable import MediaStore
@testable import MediaSupport
@testable import MediaTestSupport

final class SavedListingTests: XCTestCase {
    private var base = ""

    override func setUpWithError() throws {
        base = FileManager.default.temporaryDirectory.appendingPathComponent("mediafs-saved-\(UUID())").path
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: base)
    }

    private let url = "https://u:p@a.example/media/"

    func testARoundTrip_keepsEveryField_evenSeparatorsInNamesAndURLs() throws {
        let store = try CacheStore(root: base)
        let listing = SavedListing(url: url, entries: [
            .init(name: "tab\there%20 100%\nnew\rline", url: "https://a.example/media/x%09y", isDirectory: false,
                  info: ContentInfo(length: 1 << 40, contentType: "video/mp4", etag: "W/\"e\ttag\"",
                                    lastModified: "Tue, 01 Dec 2026 10:00:00 GMT", acceptsRanges: false)),
            .init(name: "sub", url: "https://a.example/media/sub/", isDirectory: true, info: nil),
            .init(name: "unknown.bin", url: "https://a.example/media/unknown.bin", isDirectory: false, info: nil),
            .init(name: "Ünïcødé ✓.mkv", url: "https://a.example/media/%C3%9C.mkv", isDirectory: false,
                  info: ContentInfo(length: 0)),
        ])
        try store.saveListing(listing)
        XCTAssertEqual(store.loadListing(url: url), listing)
        XCTAssertNil(store.loadListing(url: "https://a.example/other/"))
        store.removeListing(url: url)
        XCTAssertNil(store.loadListing(url: url))
    }

    func testDamagedLines_areDropped_andTheRestKept() throws {
        let store = try CacheStore(root: base)
        try store.saveListing(SavedListing(url: url, entries: [
            .init(name: "good.bin", url: "https://a.example/media/good.bin", isDirectory: false,
                  info: ContentInfo(length: 5)),
        ]))
        let files = try FileManager.default.contentsOfDirectory(atPath: base + "/listings")
        XCTAssertEqual(files.count, 1)
        let path = base + "/listings/" + files[0]
        var text = try String(contentsOfFile: path, encoding: .utf8)
        text += "i\thuge.bin\thttps://a.example/media/huge.bin\t\(Int64.max)\t1\t\t\t\n"
        text += "i\tneg.bin\thttps://a.example/media/neg.bin\t-1\t1\t\t\t\n"
        text += "x\tkind.bin\thttps://a.example/media/kind.bin\n"
        text += "f\t\thttps://a.example/media/noname\n"
        text += "f\tbad%zzescape\thttps://a.example/media/e\n"
        text += "d\tshort\n"
        try text.write(toFile: path, atomically: false, encoding: .utf8)
        XCTAssertEqual(store.loadListing(url: url)?.entries.map(\.name), ["good.bin"])
    }

    func testAFileOfAnotherVersion_isNoListing() throws {
        let store = try CacheStore(root: base)
        try store.saveListing(SavedListing(url: url, entries: []))
        let files = try FileManager.default.contentsOfDirectory(atPath: base + "/listings")
        let path = base + "/listings/" + files[0]
        let text = try String(contentsOfFile: path, encoding: .utf8)
        try text.replacingOccurrences(of: "mediafs-listing 1", with: "mediafs-listing 2")
            .write(toFile: path, atomically: false, encoding: .utf8)
        XCTAssertNil(store.loadListing(url: url))
    }
}
