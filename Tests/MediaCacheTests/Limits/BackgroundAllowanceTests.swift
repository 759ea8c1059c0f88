// `--background-daily`: charged as bytes arrive, used up at its size, a new
// UTC day from 0, and the count kept in the cache directory across a remount.
import XCTest
@testable import MediaCache
@testable import MediaStore
@testable import MediaSupport
@testable import MediaTestSupport

final class BackgroundAllowanceTests: XCTestCase {
    func testChargedUntilUsedUp_thenANewDayStartsFromNothing() {
        let clock = TestClock()
        let allowance = BackgroundAllowance(bytesPerDay: 100, store: nil, clock: clock.clock)
        allowance.charge(60)
        XCTAssertFalse(allowance.exhausted)
        allowance.charge(60)
        XCTAssertTrue(allowance.exhausted)
        XCTAssertEqual(allowance.usedToday, 120, "what running transfers brought is counted, not cut")
        clock.advance(86_400)
        XCTAssertEqual(allowance.usedToday, 0)
        XCTAssertFalse(allowance.exhausted)
    }

    func testTheCountOfTodaySurvivesARemount_notOfAnotherDay() throws {
        let dir = try TemporaryDirectory.make("allowance")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try CacheStore(root: dir)
        let clock = TestClock()
        let first = BackgroundAllowance(bytesPerDay: 1000, store: store, clock: clock.clock)
        first.charge(700)
        first.save()
        XCTAssertEqual(BackgroundAllowance(bytesPerDay: 1000, store: store, clock: clock.clock).usedToday, 700)
        clock.advance(86_400)
        XCTAssertEqual(BackgroundAllowance(bytesPerDay: 1000, store: store, clock: clock.clock).usedToday, 0)
        // A damaged file counts from 0, with a warning, never a crash.
        try "mediafs-background-use 1 x 99999999999999999999\n".write(toFile: dir + "/background-use",
                                                                          atomically: true, encoding: .utf8)
        XCTAssertNil(store.loadBackgroundUse())
    }

    /// What running background transfers will bring counts before it
    /// arrives: the allowance's own rule, so jobs reading at once (each
    /// asking megabytes through the kernel's readahead) cannot pass the cap
    /// together; what a transfer never brought is given back.
    func testBackgroundBytesOnTheirWay_countAgainstTheDayUntilTheyArriveOrTheirTransferEnds() {
        let allowance = BackgroundAllowance(bytesPerDay: 1_000, store: nil)
        XCTAssertTrue(allowance.admits(600))
        allowance.commit(600)
        XCTAssertFalse(allowance.admits(600), "600 on their way and 600 more pass 1,000")
        XCTAssertTrue(allowance.admits(400))
        allowance.charge(250, committed: 250)
        XCTAssertEqual(allowance.usedToday, 250)
        XCTAssertFalse(allowance.admits(401))
        allowance.uncommit(350)  // its transfer ended early
        XCTAssertTrue(allowance.admits(750))
        XCTAssertFalse(allowance.admits(751))
        allowance.charge(750)
        XCTAssertTrue(allowance.exhausted)
    }
}
