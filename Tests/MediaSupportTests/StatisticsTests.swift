// The pause of cache writes after a failed write is timed on the
// monotonic clock: a wall clock stepped back an hour (NTP, an admin) used
// to stop cache writes for that hour.
import XCTest
@testable import MediaSupport
@testable import MediaTestSupport

final class StatisticsTests: XCTestCase {
    func testAFailedWritePausesCacheWritesForTenMonotonicSeconds_whateverTheWallClockDoes() {
        let monotonic = Locked(1_000.0)
        let wall = Locked(1_800_000_000.0)
        let clock = Clock(monotonic: { monotonic.withLock { $0 } }, wall: { wall.withLock { $0 } })
        let statistics = Statistics(clock: clock)
        XCTAssertTrue(statistics.cacheWritable)
        statistics.cacheWriteFailed(MediaError.io("disk full"))
        XCTAssertFalse(statistics.cacheWritable)
        // The wall clock steps back an hour; 10 s pass.
        wall.withLock { $0 -= 3_600 }
        monotonic.withLock { $0 += Double(Statistics.passThroughSeconds) }
        XCTAssertTrue(statistics.cacheWritable, "writes must resume after 10 s, not after the hour the wall lost")
        // And a wall clock stepped forward does not end the pause early.
        statistics.cacheWriteFailed(MediaError.io("disk full"))
        wall.withLock { $0 += 7_200 }
        XCTAssertFalse(statistics.cacheWritable)
    }
}
