// The room the limits leave: reservations taken off and given back, the
// evictor woken once a pass when room runs short or low, measurements that
// discount what was written while they ran, and readers that wait for one
// pass at most.
import Foundation
import XCTest
@testable import MediaCache
@testable import MediaSources
@testable import MediaSegmented
@testable import MediaSupport
@testable import MediaTestSupport

final class CacheBudgetTests: XCTestCase {
    /// The evictor's wake-ups, signalled to a test that waits for one.
    private let pressures = ConditionLocked(0)

    private func budget(room: Int64? = nil, lowWater: Int64 = 0) -> CacheBudget {
        let pressures = pressures
        let budget = CacheBudget {
            pressures.withLock { $0 += 1 }
            pressures.broadcast()
        }
        if let room { budget.measured(room: room, since: budget.mark, lowWater: lowWater) }
        return budget
    }

    private var pressureCount: Int { pressures.withLock { $0 } }

    func testBeforeAnyMeasurement_thereIsNoRoom_andTheEvictorIsWoken() {
        let budget = budget()
        XCTAssertEqual(budget.reserve(upTo: 100), 0)
        XCTAssertTrue(budget.isPressed)
        XCTAssertEqual(pressureCount, 1)
    }

    func testReserve_getsWhatIsLeft_andRunningShortWakesTheEvictorOnceAPass() {
        let budget = budget(room: 100)
        XCTAssertEqual(budget.reserve(upTo: 60), 60)
        XCTAssertEqual(pressureCount, 0)
        XCTAssertFalse(budget.isPressed)
        XCTAssertEqual(budget.reserve(upTo: 60), 40)
        XCTAssertEqual(pressureCount, 1)
        XCTAssertEqual(budget.reserve(upTo: 60), 0)
        XCTAssertEqual(pressureCount, 1, "woken once until the next measurement")
        budget.measured(room: 10, since: budget.mark, lowWater: 0)
        XCTAssertFalse(budget.isPressed)
        XCTAssertEqual(budget.reserve(upTo: 60), 0, "the 100 reserved are still committed")
        XCTAssertEqual(pressureCount, 2)
    }

    func testReserve_thatLeavesLessThanTheLowWater_wakesTheEvictorThoughItGotAll() {
        let budget = budget(room: 100, lowWater: 50)
        XCTAssertEqual(budget.reserve(upTo: 40), 40)
        XCTAssertEqual(pressureCount, 0)
        XCTAssertEqual(budget.reserve(upTo: 20), 20)
        XCTAssertEqual(pressureCount, 1)
        XCTAssertTrue(budget.isPressed)
    }

    func testRelease_givesTheRoomBack() {
        let budget = budget(room: 100)
        XCTAssertEqual(budget.reserve(upTo: 100), 100)
        budget.release(30)
        XCTAssertEqual(budget.reserve(upTo: 100), 30)
        budget.release(0)
        XCTAssertEqual(budget.reserve(upTo: 1), 0)
    }

    func testAMeasurement_discountsWhatIsReservedAndWhatWasWrittenSinceItsMark() {
        let budget = budget(room: 1000)
        let mark = budget.mark
        XCTAssertEqual(budget.reserve(upTo: 100), 100)
        budget.consume(40)
        XCTAssertTrue(budget.take(25))
        // The disk said 500 free, measured before those writes were seen:
        // 60 still reserved, 40 + 25 written since the mark.
        budget.measured(room: 500, since: mark, lowWater: 0)
        XCTAssertEqual(budget.reserve(upTo: 1000), 500 - 60 - 65)
    }

    func testAMeasurement_neverLeavesTheRoomNegative() {
        let budget = budget(room: 100)
        XCTAssertEqual(budget.reserve(upTo: 100), 100)
        budget.measured(room: 10, since: budget.mark, lowWater: 0)
        XCTAssertEqual(budget.reserve(upTo: 1), 0)
        budget.release(100)
        XCTAssertEqual(budget.reserve(upTo: 1000), 100, "room went from 0 by what was given back, not from -90")
    }

    func testTake_takesOnlyWhatFits_andPressesWhenItDoesNot() {
        let budget = budget(room: 100)
        XCTAssertTrue(budget.take(60))
        XCTAssertFalse(budget.take(60))
        XCTAssertEqual(pressureCount, 1)
        XCTAssertTrue(budget.take(40))
        XCTAssertEqual(budget.reserve(upTo: 1), 0)
    }

    func testAwaitRoom_withRoomEnough_returnsAtOnceAndWakesNoOne() {
        let budget = budget(room: 100)
        XCTAssertTrue(budget.awaitRoom(100, until: .after(seconds: 10, clock: .system)))
        XCTAssertEqual(pressureCount, 0)
    }

    func testAwaitRoom_wakesTheEvictor_andReturnsWhenItsPassMadeRoom() throws {
        let budget = budget(room: 0)
        let waiting = Background { budget.awaitRoom(100, until: .after(seconds: 10, clock: .system)) }
        XCTAssertEqual(awaitPressures(1), 1, "the waiter woke the evictor once")
        budget.measured(room: 200, since: budget.mark, lowWater: 0)
        XCTAssertTrue(try waiting.result())
    }

    func testAwaitRoom_waitsForOnePassOnly_notForTheTimeout() throws {
        let budget = budget(room: 0)
        let started = Date()
        let waiting = Background { budget.awaitRoom(100, until: .after(seconds: 10, clock: .system)) }
        XCTAssertEqual(awaitPressures(1), 1, "the waiter woke the evictor once")
        budget.measured(room: 50, since: budget.mark, lowWater: 0)
        XCTAssertFalse(try waiting.result())
        XCTAssertLessThan(Date().timeIntervalSince(started), 5)
    }

    func testAwaitRoom_withNoPass_givesUpAtTheTimeout() {
        let budget = budget(room: 0)
        let started = Date()
        XCTAssertFalse(budget.awaitRoom(100, until: .after(seconds: 0.05, clock: .system)))
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 0.04)
        XCTAssertEqual(budget.counts.unansweredWaits, 1, "a wait no pass answered is counted")
    }

    /// Waits for the evictor's `count`th wake-up (10 s at most, a bound
    /// against a hang only); the wake-ups so far.
    private func awaitPressures(_ count: Int) -> Int {
        let deadline = Deadline.after(seconds: 10, clock: .system)
        return pressures.withScope { scope in
            while scope.state < count && scope.wait(until: deadline) {}
            return scope.state
        }
    }

    func testWhilePassingThrough_nothingIsTaken_noReadWaits_andNoPassIsWoken() {
        let budget = budget()
        budget.measured(room: 0, since: budget.mark, lowWater: 50, passesThrough: true)
        XCTAssertTrue(budget.passesThrough)
        XCTAssertEqual(budget.reserve(upTo: 100), 0)
        XCTAssertFalse(budget.take(100))
        XCTAssertFalse(budget.overdraw(100), "a read's own bytes pass uncached too")
        // A read that would wait for a pass (up to its deadline) goes on at once.
        let before = budget.counts.passes
        XCTAssertFalse(budget.awaitRoom(100, until: .after(seconds: 3600, clock: .system)))
        XCTAssertEqual(budget.counts.passes, before)
        XCTAssertEqual(budget.counts.unansweredWaits, 0)
        XCTAssertEqual(pressureCount, 0, "no pass can make room: only the timed one looks")
        XCTAssertFalse(budget.isPressed)
        // Room back at a timed pass: bytes are kept again.
        budget.measured(room: 1_000, since: budget.mark, lowWater: 0)
        XCTAssertFalse(budget.passesThrough)
        XCTAssertEqual(budget.reserve(upTo: 100), 100)
    }
}
