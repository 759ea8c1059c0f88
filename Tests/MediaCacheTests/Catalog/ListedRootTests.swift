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

/// A mount of one directory source: the directory is the root, listed as
/// any directory is, with names added at run time kept through its
/// relistings and only those removable.
final class ListedRootTests: XCTestCase {
    typealias FakeListing = ListingTests.FakeListing

    private var base = ""
    private var fetcher = FakeFetcher()
    private let info = ContentInfo(length: 1000, etag: "\"v1\"")

    /// Stopped before their cache is removed: a listing's save runs on a worker.
    private var made: [Catalog] = []

    override func setUpWithError() throws {
        base = try TemporaryDirectory.make("listed-root")
        fetcher = FakeFetcher()
        made = []
        // What `add` probes.
        for name in ["x.mp4", "y.mp4"] { fetcher.add("https://b.example/\(name)", bytes: [1, 2, 3]) }
    }

    override func tearDownWithError() throws {
        for catalog in made { catalog.stop() }
        fetcher.shutdown()
        try? FileManager.default.removeItem(atPath: base)
    }

    private func file(_ name: String, host: String = "a.example") -> Source {
        Source(name: name, url: "https://\(host)/\(name)", kind: .file(info))
    }

    private func catalog(_ listing: FakeListing, asRoot: Bool = true) throws -> Catalog {
        let catalog = Catalog(sources: [Source(name: "library", url: "fake://library/", kind: .directory(listing))],
                              sourceIsRoot: asRoot, store: try CacheStore(root: base), fetcher: fetcher,
                              settings: LoaderSettings())
        made.append(catalog)
        return catalog
    }

    private func assertErrno(_ errno: Int32, file: StaticString = #filePath, line: UInt = #line,
                             _ body: () throws -> Void) {
        XCTAssertThrowsError(try body(), file: file, line: line) { error in
            XCTAssertEqual((error as? MediaError)?.errno, errno, "\(error)", file: file, line: line)
        }
    }

    func testOneDirectorySource_isTheRoot_listedOnFirstLookup() throws {
        let sub = FakeListing(origin: "sub", entries: [file("c.mp4")])
        let listing = FakeListing(origin: "fake", entries: [
            file("a.mp4"), Source(name: "sub", url: "https://a.example/sub/", kind: .directory(sub)),
        ])
        let c = try catalog(listing)
        XCTAssertEqual(c.names, [], "nothing is listed before a lookup")
        XCTAssertEqual(listing.listings, 0)
        XCTAssertEqual(c.rootListingURL, "fake://library/")
        XCTAssertEqual(try c.list("/").map(\.name), ["a.mp4", "sub"])
        XCTAssertEqual(try c.attributes(at: "/a.mp4")?.size, 1000)
        XCTAssertEqual(try c.list("/sub").map(\.name), ["c.mp4"])
        XCTAssertEqual(try c.file(at: "/sub/c.mp4").source.url, "https://a.example/c.mp4")
        XCTAssertEqual(listing.listings, 1)
        XCTAssertEqual(fetcher.requestCount, 0)
    }

    func testAListedRootWhoseSourceIsGone_failsItsListingWithEIO_notAnEmptyENOENT() throws {
        let listing = FakeListing(origin: "fake", entries: [])
        listing.fail(MediaError(ENOENT, "fake: HTTP 404"))
        let c = try catalog(listing)
        assertErrno(EIO) { _ = try c.list("/") }
        assertErrno(ENOENT) { _ = try c.attributes(at: "/a.mp4") }
    }

    func testTheSameSourceNotAsTheRoot_isOneNameInIt() throws {
        let c = try catalog(FakeListing(origin: "fake", entries: [file("a.mp4")]), asRoot: false)
        XCTAssertNil(c.rootListingURL)
        XCTAssertEqual(try c.list("/").map(\.name), ["library"])
        XCTAssertEqual(try c.list("/library").map(\.name), ["a.mp4"])
        assertErrno(EINVAL) { try c.refresh("/") }
    }

    func testARefreshOfTheRoot_replacesItsListedNames() throws {
        let listing = FakeListing(origin: "fake", entries: [file("a.mp4")])
        let c = try catalog(listing)
        XCTAssertEqual(try c.list("/").map(\.name), ["a.mp4"])
        listing.set([file("b.mp4")])
        try c.refresh("/")
        XCTAssertEqual(try c.list("/").map(\.name), ["b.mp4"])
        assertErrno(ENOENT) { _ = try c.attributes(at: "/a.mp4") }
    }

    func testAnAddedName_survivesARefresh_afterTheListingsNames() throws {
        let listing = FakeListing(origin: "fake", entries: [file("a.mp4")])
        let c = try catalog(listing)
        _ = try c.list("/")
        XCTAssertEqual(try c.add(url: "https://b.example/x.mp4"), "x.mp4")
        listing.set([file("b.mp4"), file("a.mp4")])
        try c.refresh("/")
        XCTAssertEqual(try c.list("/").map(\.name), ["b.mp4", "a.mp4", "x.mp4"])
        XCTAssertEqual(try c.file(at: "/x.mp4").source.url, "https://b.example/x.mp4")
    }

    func testAnAddedName_thatTheListingTakesLater_isNumbered_andGetsItBackWhenTheListingDropsIt() throws {
        let listing = FakeListing(origin: "fake", entries: [file("a.mp4")])
        let c = try catalog(listing)
        XCTAssertEqual(try c.add(url: "https://b.example/x.mp4"), "x.mp4")
        listing.set([file("a.mp4"), file("x.mp4")])
        try c.refresh("/")
        XCTAssertEqual(try c.list("/").map(\.name), ["a.mp4", "x.mp4", "x (2).mp4"], "the listing's name wins")
        XCTAssertEqual(try c.file(at: "/x.mp4").source.url, "https://a.example/x.mp4")
        XCTAssertEqual(try c.file(at: "/x (2).mp4").source.url, "https://b.example/x.mp4")
        listing.set([file("a.mp4")])
        try c.refresh("/")
        XCTAssertEqual(try c.list("/").map(\.name), ["a.mp4", "x.mp4"])
        XCTAssertEqual(try c.file(at: "/x.mp4").source.url, "https://b.example/x.mp4")
    }

    func testAnAddedName_beforeTheFirstListing_followsIt() throws {
        let c = try catalog(FakeListing(origin: "fake", entries: [file("a.mp4")]))
        XCTAssertEqual(try c.add(url: "https://b.example/y.mp4"), "y.mp4")
        XCTAssertEqual(try c.list("/").map(\.name), ["a.mp4", "y.mp4"])
    }

    func testAnAddedDirectory_survivesARefresh_andIsListedBelowTheRoot() throws {
        let listing = FakeListing(origin: "fake", entries: [file("a.mp4")])
        let c = try catalog(listing)
        _ = try c.list("/")
        XCTAssertEqual(try c.add(url: "dav://b.example/more/"), "more")
        try c.refresh("/")
        XCTAssertEqual(try c.list("/").map(\.name), ["a.mp4", "more"])
        XCTAssertEqual(try c.list("/").map(\.isDirectory), [false, true])
    }

    func testRemove_atAListedRoot_takesAnAddedName_andRefusesAListedOne() throws {
        let listing = FakeListing(origin: "fake", entries: [file("a.mp4")])
        let c = try catalog(listing)
        _ = try c.list("/")
        _ = try c.add(url: "https://b.example/x.mp4")
        assertErrno(EROFS) { try c.remove(name: "a.mp4") }
        assertErrno(ENOENT) { try c.remove(name: "nope.mp4") }
        try c.remove(name: "x.mp4")
        XCTAssertEqual(try c.list("/").map(\.name), ["a.mp4"])
        try c.refresh("/")
        XCTAssertEqual(try c.list("/").map(\.name), ["a.mp4"], "a removed name does not come back")
        assertErrno(ENOENT) { _ = try c.file(at: "/x.mp4") }
    }

    func testARootOfSources_removesAnyOfItsNames() throws {
        let c = Catalog(sources: [file("a.mp4"), file("b.mp4")], store: try CacheStore(root: base),
                        fetcher: fetcher, settings: LoaderSettings())
        made.append(c)
        _ = try c.add(url: "https://b.example/x.mp4")
        try c.remove(name: "a.mp4")
        try c.remove(name: "x.mp4")
        XCTAssertEqual(c.names, ["b.mp4"])
    }

    func testTheRootsAttributes_offerRefresh_onlyAtAListedRoot() throws {
        let listing = FakeListing(origin: "fake", entries: [file("a.mp4")])
        let listed = try catalog(listing)
        XCTAssertTrue(AdminAttributes.listRoot(of: listed).contains("user.mediafs.refresh"))
        XCTAssertTrue(AdminAttributes.listRoot(of: listed).contains("user.mediafs.stats"))
        XCTAssertEqual(try AdminAttributes.readRoot("user.mediafs.refresh", of: listed), "")
        _ = try listed.list("/")
        listing.set([file("b.mp4")])
        XCTAssertEqual(try AdminAttributes.writeRoot("user.mediafs.refresh", value: "1", to: listed), .none)
        XCTAssertEqual(listed.names, ["b.mp4"])
        let sources = try catalog(listing, asRoot: false)
        XCTAssertFalse(AdminAttributes.listRoot(of: sources).contains("user.mediafs.refresh"))
        assertErrno(ENODATA) { _ = try AdminAttributes.readRoot("user.mediafs.refresh", of: sources) }
        assertErrno(ENOTSUP) { _ = try AdminAttributes.writeRoot("user.mediafs.refresh", value: "1", to: sources) }
    }

    /// Records and saved listings are keyed by URL, not by path: the cache
    /// of a mount that showed the source as a directory serves it as the root.
    func testTheCacheOfTheOldLayout_servesTheRoot_withNoRequest() throws {
        let url = "https://a.example/a.mp4"
        let bytes = [UInt8](repeating: 7, count: 1000)
        fetcher.add(url, bytes: bytes)
        let listing = FakeListing(origin: "fake", entries: [file("a.mp4")])
        let old = try catalog(listing, asRoot: false)
        XCTAssertEqual(try read(old.file(at: "/library/a.mp4")), bytes)
        old.stop()
        let requests = fetcher.requestCount
        listing.fail(MediaError(EHOSTUNREACH, "fake: down"))
        let new = try catalog(listing)
        XCTAssertEqual(try new.list("/").map(\.name), ["a.mp4"], "from the saved listing")
        XCTAssertEqual(try read(new.file(at: "/a.mp4")), bytes)
        XCTAssertEqual(fetcher.requestCount, requests, "served from the cache")
    }

    private func read(_ loader: FileLoader) throws -> [UInt8] {
        let pattern = ReadPattern()
        _ = loader.attach(pattern)
        defer { loader.release(pattern) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        var done = 0
        while true {
            let n = try buffer[done...].withUnsafeMutableBytes {
                try loader.read(into: $0, at: Int64(done), pattern: pattern)
            }
            if n == 0 { break }
            done += n
        }
        return Array(buffer[..<done])
    }
}
