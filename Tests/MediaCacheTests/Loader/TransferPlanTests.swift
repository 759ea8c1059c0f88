// "Join a transfer in flight, or start one" (TransferPlan) and the failures
// that keep a read from asking (TransferBook.refusal), without a loader:
// tables of transfers running and the step each point gets.
import Foundation
import XCTest
@testable import MediaCache
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaStore
@testable import MediaTestSupport

final class TransferPlanTests: XCTestCase {
    typealias Transfer = LoaderState.Transfer
    private let owner = ObjectIdentifier(NSObject())
    private let joinDistance: Int64 = 1 << 20

    private func transfer(_ position: Int64, _ end: Int64, held limit: Int64? = nil, priority: FetchRequest.Priority = .read,
                          cancelled: Bool = false) -> Transfer {
        var made = Transfer(end: end, position: position, owner: owner, priority: priority, limit: limit, start: position)
        made.cancelled = cancelled
        return made
    }

    private func step(at point: Int64, of hole: Range<Int64>, _ transfers: [TransferID: Transfer],
                      priority: FetchRequest.Priority = .read, acceptsRanges: Bool = true) -> TransferPlan.Step {
        var state = LoaderState(clock: .system)
        state.learned(ContentInfo(length: 1 << 30, acceptsRanges: acceptsRanges), at: 0, hasEntry: true, readClasses: false)
        return TransferPlan.step(at: point, of: hole, window: 4 << 20, priority: priority, acceptsRanges: acceptsRanges,
                                 transfers: transfers) { state.covers($0, $1, joinDistance: self.joinDistance) }
    }

    func testAReadsStep_joinsWhatWillSoonWriteItsPoint_elseStarts() {
        let mib: Int64 = 1 << 20
        let cases: [(String, [TransferID: Transfer], point: Int64, priority: FetchRequest.Priority, TransferPlan.Step)] = [
            ("nothing runs", [:], 0, .read, .start),
            ("a transfer at the point", [1: transfer(0, 8 * mib)], 0, .read, .join(1, promote: false, letGoTo: nil)),
            ("within the join distance", [1: transfer(0, 8 * mib)], mib, .read, .join(1, promote: false, letGoTo: nil)),
            ("past the join distance: its own request", [1: transfer(0, 8 * mib)], 2 * mib, .read, .start),
            ("past the transfer's end", [1: transfer(0, mib)], mib, .read, .start),
            ("a stopped one is never joined", [1: transfer(0, 8 * mib, cancelled: true)], 0, .read, .start),
            ("a preload lifted to a read's place", [1: transfer(0, 8 * mib, priority: .preload)], 0, .read,
             .join(1, promote: true, letGoTo: nil)),
            ("a player's never lowered to a scan's", [1: transfer(0, 8 * mib, priority: .read)], 0, .scan,
             .join(1, promote: false, letGoTo: nil)),
            ("a long one is let go on a window past the point", [1: transfer(0, 64 * mib, held: 2 * mib)], mib, .read,
             .join(1, promote: false, letGoTo: 5 * mib)),
            ("a long one far before its hold's next MiB: its own request", [1: transfer(0, 64 * mib, held: 2 * mib)],
             4 * mib, .read, .start),
        ]
        for (why, transfers, point, priority, expected) in cases {
            XCTAssertEqual(step(at: point, of: point..<point + 4096, transfers, priority: priority), expected, why)
        }
    }

    func testAServerWithoutRanges_hasEveryReaderFollowItsOneStream() {
        let stream = [TransferID(7): transfer(0, 1 << 30)]
        // Any point of it covers, however far: the stream brings every byte.
        XCTAssertEqual(step(at: 900 << 20, of: (900 << 20)..<(901 << 20), stream, acceptsRanges: false),
                       .join(7, promote: false, letGoTo: nil))
        let stopped = [TransferID(7): transfer(0, 1 << 30, cancelled: true), 8: transfer(0, 100)]
        XCTAssertEqual(step(at: 200, of: 200..<300, stopped, acceptsRanges: false), .followStream(next: 300))
        XCTAssertEqual(step(at: 200, of: 200..<300, [:], acceptsRanges: false), .start)
    }

    func testAStartedTransfer_isLongOnlyForAStreamingReaderOfAServerThatHolds() {
        let hole: Range<Int64> = 100..<200
        XCTAssertEqual(TransferPlan.started(at: 100, of: hole, window: 1000, streams: true, holds: true, longEnd: 9000).end,
                       9000)
        XCTAssertEqual(TransferPlan.started(at: 100, of: hole, window: 1000, streams: true, holds: true, longEnd: 9000).hold,
                       1100)
        for (streams, holds, window) in [(false, true, Int64(1000)), (true, false, 1000), (true, true, 0)] {
            let shape = TransferPlan.started(at: 100, of: hole, window: window, streams: streams, holds: holds, longEnd: 9000)
            XCTAssertNil(shape.hold, "streams \(streams) holds \(holds) window \(window)")
            XCTAssertEqual(shape.end, max(200, 100 + window), "to the hole's end or a window on")
        }
    }

    func testReadahead_countsAnyTransferBringingItsLead_butALongOneOnlyNear() {
        var state = LoaderState(clock: .system)
        state.learned(ContentInfo(length: 1 << 30), at: 0, hasEntry: true, readClasses: false)
        let covers: (Transfer, Int64) -> Bool = { state.covers($0, $1, joinDistance: 1 << 20) }
        let mib: Int64 = 1 << 20
        XCTAssertEqual(TransferPlan.bringing(6 * mib, transfers: [1: transfer(0, 8 * mib)], covers: covers)?.id, 1,
                       "a short one far behind its lead still brings it")
        XCTAssertNil(TransferPlan.bringing(60 * mib, transfers: [1: transfer(0, 900 * mib, held: 2 * mib)], covers: covers),
                     "a long one far behind does not: it would be let go on to the lead")
        XCTAssertEqual(TransferPlan.bringing(2 * mib, transfers: [1: transfer(0, 900 * mib, held: 2 * mib)],
                                             covers: covers)?.id, 1)
        XCTAssertNil(TransferPlan.bringing(mib, transfers: [1: transfer(0, 8 * mib, cancelled: true)], covers: covers))
        XCTAssertEqual(TransferPlan.stream(at: 2 * mib, window: 4 * mib, transfers: [1: transfer(mib, 900 * mib, held: 3 * mib)])?.id, 1)
        XCTAssertNil(TransferPlan.stream(at: 4 * mib, window: 4 * mib, transfers: [1: transfer(mib, 900 * mib, held: 3 * mib)]),
                     "its hold is behind the read")
    }

    func testTheLeadWalk_passesWhatIsPresentOrOnItsWay_toTheFirstPointNothingBrings() {
        let mib: Int64 = 1 << 20
        // Present: the first MiB, and 3-4 MiB.
        let presentEnd: (Int64) -> Int64 = { point in
            point < mib ? mib : (3 * mib..<4 * mib).contains(point) ? 4 * mib : point
        }
        func walk(_ transfers: [TransferID: Transfer], from offset: Int64 = 0, within: Int64 = 64 * mib)
            -> TransferPlan.Lead {
            TransferPlan.lead(from: offset, length: 16 * mib, within: within, presentEnd: presentEnd,
                              transfers: transfers, brings: TransferPlan.holds, endsAt: \.isLong)
        }
        let cases: [(String, [TransferID: Transfer], from: Int64, within: Int64, TransferPlan.Lead)] = [
            ("past the bytes present", [:], 0, 64 * mib, .open(mib)),
            ("past a transfer, then bytes present", [1: transfer(mib, 3 * mib)], 0, 64 * mib, .open(4 * mib)),
            ("a transfer far behind still holds the lead", [1: transfer(0, 2 * mib)], mib, 64 * mib, .open(2 * mib)),
            ("a stopped one brings nothing", [1: transfer(mib, 3 * mib, cancelled: true)], 0, 64 * mib, .open(mib)),
            ("a transfer it may not pass", [1: transfer(mib, 16 * mib, held: 2 * mib)], 0, 64 * mib, .transfer(1)),
            ("enough within the bound", [1: transfer(mib, 3 * mib)], 0, 2 * mib, .enough),
            ("the bound is counted after a step", [:], 0, mib + 1, .open(mib)),
            ("to the file's end", [1: transfer(mib, 3 * mib), 2: transfer(4 * mib, 16 * mib)], 0, 64 * mib, .enough),
        ]
        for (why, transfers, offset, within, expected) in cases {
            XCTAssertEqual(walk(transfers, from: offset, within: within), expected, why)
        }
    }

    func testTheServersFailures_refuseAReadInOrder() {
        let clock = TestClock()
        var book = TransferBook(clock: clock.clock)
        XCTAssertNil(book.refusal(at: clock.clock.monotonic(), believeMissingFor: 30))
        book.failed(now: clock.clock.monotonic(), backoff: { _ in 2 })
        XCTAssertEqual(book.refusal(at: clock.clock.monotonic(), believeMissingFor: 30), .wait)
        XCTAssertNil(book.refusal(at: clock.clock.monotonic() + 2, believeMissingFor: 30), "the backoff is over")
        book.setLastError(MediaError(ENOENT, "HTTP 404"))
        XCTAssertEqual(book.refusal(at: clock.clock.monotonic() + 29, believeMissingFor: 30), .fail(ENOENT, "HTTP 404"))
        XCTAssertNil(book.refusal(at: clock.clock.monotonic() + 31, believeMissingFor: 30), "a 404 is not believed forever")
        book.unavailable(until: clock.clock.monotonic() + 100)
        XCTAssertEqual(book.refusal(at: clock.clock.monotonic() + 50, believeMissingFor: 30), .fail(ENOENT, "HTTP 404"))
        book.setLastError(MediaError(ENOKEY, "no key yet"))
        XCTAssertEqual(book.refusal(at: clock.clock.monotonic() + 500, believeMissingFor: 30), .fail(EIO, "no key yet"),
                       "a part without its key fails as EIO until the key comes, whatever the time")
        book.forgetFailures()
        XCTAssertNil(book.refusal(at: clock.clock.monotonic(), believeMissingFor: 30))
    }
}
