// The --bwlimit bucket without a network: what each priority may take as
// time passes, and that idle time earns nothing.
import XCTest
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport

final class BandwidthLimitTests: XCTestCase {
    let piece = 16 << 10

    func testRatesBelowTheMinimumOrPastLimitsAreRefused() {
        XCTAssertNil(BandwidthLimit(bytesPerSecond: BandwidthLimit.minRate - 1))
        XCTAssertNil(BandwidthLimit(bytesPerSecond: Limits.maxLength + 1))
        XCTAssertNotNil(BandwidthLimit(bytesPerSecond: 8 << 20))
    }

    func testOneSecondOfOneReadPassesTheRateAndNoMore() {
        let limit = BandwidthLimit(bytesPerSecond: 8 << 20)!
        var taken = 0
        for step in 0...1000 {
            limit.refill(now: Double(step) / 1000, running: [.read])
            while limit.take(piece, priority: .read) { taken += piece }
        }
        XCTAssertLessThanOrEqual(taken, 8 << 20)
        XCTAssertGreaterThan(taken, (8 << 20) - 2 * piece)
    }

    func testIdleTimeEarnsNothing() {
        let limit = BandwidthLimit(bytesPerSecond: 8 << 20)!
        limit.refill(now: 0, running: [.read])
        limit.refill(now: 0.01, running: [])
        limit.refill(now: 5, running: [.read])
        XCTAssertFalse(limit.take(piece, priority: .read))
    }

    func testReadsGoFirstAndBackgroundKeepsItsFloor() {
        let limit = BandwidthLimit(bytesPerSecond: 8 << 20)!
        var read = 0, background = 0
        limit.refill(now: 0, running: [.read, .readahead])
        for step in 1...1000 {
            limit.refill(now: Double(step) / 1000, running: [.read, .readahead])
            while limit.take(piece, priority: .read) { read += piece }
            while limit.take(piece, priority: .readahead) { background += piece }
        }
        XCTAssertGreaterThan(read, background * 8)
        XCTAssertGreaterThan(background, 0, "background starved")
        XCTAssertLessThanOrEqual(read + background, 8 << 20)
    }

    func testBackgroundGetsWhatReadsLeave() {
        let limit = BandwidthLimit(bytesPerSecond: 8 << 20)!
        var background = 0
        limit.refill(now: 0, running: [.read, .readahead])
        for step in 1...1000 {
            // A read the server feeds slowly takes nothing.
            limit.refill(now: Double(step) / 1000, running: [.read, .readahead])
            while limit.take(piece, priority: .readahead) { background += piece }
        }
        XCTAssertGreaterThan(background, 7 << 20)
    }
}
