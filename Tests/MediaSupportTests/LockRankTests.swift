// The lock order is checked, not described: in a debug build (the unit
// suite's), taking a ranked lock while holding one of a higher rank is
// reported with both names. A test records the report instead of trapping.
import Foundation
import XCTest
@testable import MediaSupport
@testable import MediaTestSupport

final class LockRankTests: XCTestCase {
    private let reports = Locked<[String]>([])

    override func setUp() {
        let reports = self.reports
        HeldRanks.onViolation = { message in reports.withLock { $0.append(message) } }
    }

    override func tearDown() {
        HeldRanks.onViolation = { message in preconditionFailure(message) }
    }

    private var reported: [String] { reports.withLock { $0 } }

    /// The order is checked in debug builds only (the suite's).
    private func requireChecks() throws {
        #if !DEBUG
        throw XCTSkip("the lock order is checked in debug builds only")
        #endif
    }

    func testTakingLocksInRankOrder_reportsNothing() throws {
        try requireChecks()
        let outer = Locked(0, rank: .catalogState)
        let inner = ConditionLocked(0, rank: .loader)
        let leaf = Condition(rank: .budget)
        outer.withLock { _ in inner.withLock { _ in leaf.withLock {} } }
        XCTAssertEqual(reported, [])
        XCTAssertEqual(HeldRanks.current.count, 0, "every rank let go with its lock")
    }

    func testTakingAnOuterLockUnderAnInnerOne_isReported_namingBoth() throws {
        try requireChecks()
        let catalog = Locked(0, rank: .catalogState)
        let loader = ConditionLocked(0, rank: .loader)
        loader.withLock { _ in catalog.withLock { _ in } }
        XCTAssertEqual(reported.count, 1)
        XCTAssertTrue(reported.first?.contains("taking Catalog.state") == true, "\(reported)")
        XCTAssertTrue(reported.first?.contains("while holding FileLoader.lock") == true, "\(reported)")
    }

    func testTwoLeavesOfOneRank_mayNotNest_butARankThatNestsMay() throws {
        try requireChecks()
        let vodProbe = Locked(0, rank: .contentProbe)
        let segmentProbe = Locked(0, rank: .contentProbe)
        vodProbe.withLock { _ in segmentProbe.withLock { _ in } }
        XCTAssertEqual(reported, [], "a segment's probe under its VOD's is the order")
        let budget = Condition(rank: .budget)
        let pending = Locked(0, rank: .fetcherPending)
        budget.withLock { pending.withLock { _ in } }
        XCTAssertEqual(reported.count, 1, "leaves take nothing under them: \(reported)")
    }

    func testATryLock_isNotChecked_andAWait_keepsTheRankHeld() throws {
        try requireChecks()
        let flush = Locked(false, rank: .loaderFlush)
        let loader = ConditionLocked(0, rank: .loader)
        // A try-lock cannot deadlock: the loader's idle check takes flushLock so.
        loader.withLock { _ in _ = flush.withLockIfAvailable { _ in } }
        XCTAssertEqual(reported, [])
        loader.withScope { scope in
            XCTAssertFalse(scope.wait(until: Deadline(at: 0, clock: .system)))
            XCTAssertEqual(HeldRanks.current.map(\.name), ["FileLoader.lock"])
        }
        XCTAssertEqual(HeldRanks.current.count, 0)
    }
}
