// When a listing that succeeded is believed: a table of what it kept of the
// names before, and the second listing that confirms a doubted one.
import XCTest
@testable import MediaCache

final class ListingDoubtTests: XCTestCase {
    func testWhatIsDoubted_mostOrAllNamesDropped_notAFewNorAnyWhenOff() {
        let doubt = ListingDoubt(delay: 30)
        let table: [(previous: Int, kept: Int, doubted: Bool)] = [
            (500, 0, true), (500, 10, true), (500, 249, true), (500, 250, false), (500, 497, false),
            (500, 500, false), (500, 600, false),
            (1, 0, true), (4, 0, true),            // all of them, however few
            (8, 2, true), (8, 3, false),           // more than 5 dropped and more than half
            (10, 4, true), (10, 5, false), (6, 1, false), (0, 0, false),
        ]
        for row in table {
            XCTAssertEqual(doubt.doubts(previous: row.previous, kept: row.kept), row.doubted,
                           "\(row.kept) of \(row.previous)")
        }
        XCTAssertFalse(ListingDoubt(delay: 0).doubts(previous: 500, kept: 0), "0 believes every listing")
    }

    func testADoubtedListing_isConfirmedOnlyByOneAtLeastTheDelayLater() {
        let doubt = ListingDoubt(delay: 30)
        XCTAssertEqual(doubt.verdict(previous: 500, kept: 0, since: nil, now: 100),
                       .doubted(dropped: 500, previous: 500, until: 130))
        XCTAssertEqual(doubt.verdict(previous: 500, kept: 0, since: 100, now: 129),
                       .doubted(dropped: 500, previous: 500, until: 130), "too soon: still doubted")
        XCTAssertEqual(doubt.verdict(previous: 500, kept: 0, since: 100, now: 130),
                       .confirmed(dropped: 500, previous: 500))
        XCTAssertEqual(doubt.verdict(previous: 500, kept: 500, since: 100, now: 110), .believed, "whole again")
    }
}
