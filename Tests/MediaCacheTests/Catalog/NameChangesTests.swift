// The names a relisting tells the kernel of (decision 0051): the diff of
// two name tables, and what a catalog's refreshes hand to `start(names:)`, and a
// root's added and removed names.
import Foundation
import XCTest
@testable import MediaCache
@testable import MediaSources
@testable import MediaStore
@testable import MediaSupport
#if canImport(Glibc)
import Glibc
@testable import MediaTestSupport
#endif

final class NameChangesTests: XCTestCase {
    typealias FakeListing = ListingTests.FakeListing

    // MARK: The diff

    private func diff(_ old: [String: String], _ new: [String: String]) -> NameChanges {
        NameChanges.between(old, new, in: "/d") { $0 == $1 }
    }

    func testBetween_sameNamesSameTargets_isEmpty() {
        XCTAssertTrue(diff(["a": "1", "b": "2"], ["b": "2", "a": "1"]).isEmpty)
    }

    func testBetween_namesOnlyNew_areAdded_onlyOld_areRemoved_keptButElsewhere_areChanged() {
        let changes = diff(["kept": "1", "gone": "2", "moved": "3", "gone2": "4"],
                           ["kept": "1", "moved": "9", "new": "5", "a-new": "6"])
        XCTAssertEqual(changes, NameChanges(directory: "/d", added: ["a-new", "new"], removed: ["gone", "gone2"],
                                            changed: ["moved"]))
        XCTAssertEqual(changes.count, 5)
    }

    func testBetween_fromNothing_addsEveryName_toNothing_removesEveryName() {
        XCTAssertEqual(diff([:], ["b": "1", "a": "2"]).added, ["a", "b"])
        XCTAssertEqual(diff(["b": "1", "a": "2"], [:]).removed, ["a", "b"])
    }

    // MARK: What refreshes report

    private var base = ""
    private var fetcher = FakeFetcher()
    private var made: [Catalog] = []
    private let info = ContentInfo(length: 1000, etag: "\"v1\"")

    override func setUpWithError() throws {
        base = try TemporaryDirectory.make("name-changes")
        fetcher = FakeFetcher()
        made = []
    }

    override func tearDownWithError() throws {
        for catalog in made { catalog.stop() }
        fetcher.shutdown()
        try? FileManager.default.removeItem(atPath: base)
    }

    private func file(_ name: String, url: String? = nil, info: ContentInfo? = nil) -> Source {
        Source(name: name, url: url ?? "https://a.example/\(name)", kind: .file(info ?? self.info))
    }

    /// A catalog of `listing` as the root, whose reported names are kept.
    private func catalog(_ listing: FakeListing) throws -> (Catalog, Locked<[NameChanges]>) {
        let catalog = Catalog(sources: [Source(name: "library", url: "fake://library/", kind: .directory(listing))],
                              sourceIsRoot: true, store: try CacheStore(root: base), fetcher: fetcher,
                              settings: LoaderSettings())
        made.append(catalog)
        let heard = Locked<[NameChanges]>([])
        catalog.start(names: NameTeller(tell: { names in heard.withLock { $0.append(names) } }, waitUntilTold: {}))
        return (catalog, heard)
    }

    func testTheFirstListing_reportsNoNames_theKernelHoldsNoneOfThem() throws {
        let (c, heard) = try catalog(FakeListing(origin: "fake", entries: [file("a.mp4")]))
        XCTAssertEqual(try c.list("/").map(\.name), ["a.mp4"])
        XCTAssertEqual(heard.withLock { $0 }, [])
    }

    func testARefresh_reportsTheNamesAddedRemovedAndLeadingElsewhere_andNoneUnchanged() throws {
        let sub = FakeListing(origin: "sub", entries: [file("s.mp4")])
        let listing = FakeListing(origin: "fake", entries: [
            file("same.mp4"), file("gone.mp4"), file("moved.mp4"),
            Source(name: "sub", url: "https://a.example/sub/", kind: .directory(sub)),
        ])
        let (c, heard) = try catalog(listing)
        _ = try c.list("/")
        listing.set([file("same.mp4"), file("moved.mp4", url: "https://b.example/moved.mp4"), file("new.mp4"),
                     Source(name: "sub", url: "https://a.example/sub/", kind: .directory(sub))])
        try c.refresh("/")
        XCTAssertEqual(heard.withLock { $0 }, [NameChanges(directory: "", added: ["new.mp4"], removed: ["gone.mp4"],
                                                           changed: ["moved.mp4"])])
        try c.refresh("/")
        XCTAssertEqual(heard.withLock { $0 }.count, 1, "a refresh that changed nothing reported names")
    }

    func testANameAddedAtTheRoot_andRemoved_isReportedEachTime() throws {
        let (c, heard) = try catalog(FakeListing(origin: "fake", entries: [file("a.mp4")]))
        _ = try c.list("/")
        let name = try c.add(url: "https://a.example/dir/")
        XCTAssertEqual(try c.list("/").map(\.name).sorted(), ["a.mp4", name])
        try c.remove(name: name)
        XCTAssertEqual(heard.withLock { $0 }, [NameChanges(directory: "", added: [name]),
                                               NameChanges(directory: "", removed: [name])])
    }

    func testARefreshOfASubdirectory_reportsItsPath() throws {
        let sub = FakeListing(origin: "sub", entries: [file("s.mp4")])
        let listing = FakeListing(origin: "fake", entries: [
            Source(name: "sub", url: "https://a.example/sub/", kind: .directory(sub)),
        ])
        let (c, heard) = try catalog(listing)
        _ = try c.list("/sub")
        sub.set([])
        try c.refresh("/sub")
        XCTAssertEqual(heard.withLock { $0 }, [NameChanges(directory: "/sub", removed: ["s.mp4"])])
    }

    func testAFileWhoseListingShowsANewVersion_isReportedChanged_onceItsLoaderFoundIt() throws {
        let listing = FakeListing(origin: "fake", entries: [file("a.mp4"), file("b.mp4")])
        let (c, heard) = try catalog(listing)
        _ = try c.list("/")
        _ = try c.file(at: "/a.mp4")
        listing.set([file("a.mp4", info: ContentInfo(length: 2000, etag: "\"v2\"")), file("b.mp4")])
        try c.refresh("/")
        XCTAssertEqual(heard.withLock { $0 }, [NameChanges(directory: "", changed: ["a.mp4"])])
        XCTAssertEqual(try c.attributes(at: "/a.mp4")?.size, 2000)
    }
}
