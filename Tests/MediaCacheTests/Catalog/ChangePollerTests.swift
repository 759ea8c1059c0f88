// The schedule of change polls (decision 0049), over a fake fetcher that
// records every request: polls go at the lowest priority, an unchanged
// directory is never listed again, a changed one is handed to the relist
// once, and a directory that left the tree is no longer asked.
import Foundation
import XCTest
@testable import MediaCache
@testable import MediaNetwork
@testable import MediaSources
@testable import MediaSupport
@testable import MediaTestSupport

final class ChangePollerTests: XCTestCase {
    private let url = "http://host/films/"
    private let page = Array("<a href=\"a.mkv\">a.mkv</a>\n<a href=\"b.mkv\">b.mkv</a>".utf8)

    private final class Relists: @unchecked Sendable {
        let lock = NSLock()
        var urls: [String] = []
        var count: Int { lock.withLock { urls.count } }
    }

    func testPolls_goAtTheLowestPriority_andAnUnchangedDirectoryIsNeverListedAgain_butAChangedOneOnce() throws {
        let fetcher = FakeFetcher()
        fetcher.add(url, bytes: page)
        defer { fetcher.shutdown() }
        let poller = ChangePoller(settings: PollSchedule(interval: 0.05, perSecond: 1000), fetcher: fetcher,
                                  clock: .system, timeout: 10)
        let relists = Relists()
        poller.start { directory, _ in relists.lock.withLock { relists.urls.append(directory.url ?? "") } }
        defer { poller.stop() }
        let listing = HTMLIndex(url: url)
        let directory = CatalogState.Directory(listing: listing, url: url, path: "/films")
        let (_, token) = try listing.listWithToken(in: ListingContext(clock: .system, fetchText: { [page] _ in
            String(decoding: page, as: UTF8.self)
        }))
        poller.note(directory, token: token)

        XCTAssertTrue(fetcher.waitUntil { $0.gets.count >= 5 }, "no polls")
        XCTAssertEqual(relists.count, 0, "an unchanged directory was listed again")
        XCTAssertTrue(fetcher.gets.allSatisfy { $0.priority == .background && $0.request.group == "mediafs-polls" })
        // The fake gives an ETag: from the second poll on, it is sent back.
        XCTAssertTrue(fetcher.gets.dropFirst().allSatisfy { $0.request.headers.contains("If-None-Match: \"v1\"") })

        fetcher.update(url) { $0.bytes = Array("<a href=\"c.mkv\">c.mkv</a>".utf8) }
        XCTAssertTrue(fetcher.waitUntil { _ in relists.count >= 1 }, "a change not handed to the relist")
        XCTAssertEqual(relists.urls.first, url)
    }

    func testADirectoryThatLeftTheTree_isNoLongerAsked() throws {
        let fetcher = FakeFetcher()
        fetcher.add(url, bytes: page)
        defer { fetcher.shutdown() }
        let poller = ChangePoller(settings: PollSchedule(interval: 0.05, perSecond: 1000), fetcher: fetcher,
                                  clock: .system, timeout: 10)
        poller.start { _, _ in }
        defer { poller.stop() }
        var directory: CatalogState.Directory? = CatalogState.Directory(listing: HTMLIndex(url: url), url: url, path: "/f")
        poller.note(directory!, token: nil)
        XCTAssertEqual(poller.watchedCount, 1)
        directory = nil
        XCTAssertTrue(fetcher.waitUntil { _ in poller.watchedCount == 0 }, "a directory no one holds is still polled")
    }
}
