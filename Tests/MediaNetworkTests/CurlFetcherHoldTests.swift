// CurlFetcher's long transfers against a real loopback server: a transfer
// delivers what it is allowed and holds there (libcurl keeps the rest,
// TCP stops the server), goes on when allowed more, and gives its
// connection up to a read that waits for one.
import Foundation
import XCTest
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport
#if canImport(Glibc)
import Glibc
#endif

final class CurlFetcherHoldTests: XCTestCase {
    /// Counts each transfer's body bytes and how it ended.
    final class Tally: TransferDelegate, @unchecked Sendable {
        private let condition = NSCondition()
        private var bytes: [TransferID: Int64] = [:]
        private var ends: [TransferID: MediaError?] = [:]
        private var wrong = false
        private let pattern: Bool

        init(pattern: Bool = true) { self.pattern = pattern }

        func transfer(_ id: TransferID, receiveHead head: ResponseHead) -> Bool { true }
        func transfer(_ id: TransferID, receiveBody body: UnsafeRawBufferPointer) -> Bool {
            condition.withLock {
                let at = bytes[id, default: 0]
                // The server's bytes are i % 251: a piece's first and last
                // bytes in their places (every byte costs seconds under TSan).
                if pattern, let first = body.first, let last = body.last,
                   first != UInt8(at % 251) || last != UInt8((at + Int64(body.count) - 1) % 251) {
                    wrong = true
                }
                bytes[id] = at + Int64(body.count)
                condition.broadcast()
            }
            return true
        }
        func transfer(_ id: TransferID, completeWith error: MediaError?) {
            condition.withLock {
                ends[id] = error
                condition.broadcast()
            }
        }

        func delivered(_ id: TransferID) -> Int64 { condition.withLock { bytes[id, default: 0] } }
        func end(_ id: TransferID) -> MediaError?? { condition.withLock { ends[id] } }
        var sawWrongBytes: Bool { condition.withLock { wrong } }

        /// Whether `predicate` came true within `seconds` (a bound against a hang only).
        func wait(seconds: Double = 30, _ predicate: (Tally) -> Bool) -> Bool {
            let deadline = Date(timeIntervalSinceNow: seconds)
            while !predicate(self) {
                condition.lock()
                let woke = condition.wait(until: min(deadline, Date(timeIntervalSinceNow: 0.05)))
                condition.unlock()
                if !woke && Date() >= deadline { return predicate(self) }
            }
            return true
        }
    }

    /// What libcurl hands the write callback at most at once: a hold
    /// passes its allowance by less than this.
    let curlPiece: Int64 = 16 << 10

    /// Runs a whole body from `witness` through `fetcher`: round after round
    /// of its network thread, in which a transfer that did not hold would
    /// have gone on too. Whether it came whole.
    private func runAnotherTransfer(_ fetcher: CurlFetcher, from witness: LoopbackServer) -> Bool {
        let tally = Tally()
        let id = fetcher.start(FetchRequest(url: witness.url("witness.bin"), priority: .read), delegate: tally)
        return tally.wait { $0.end(id) != nil } && tally.end(id)!?.message == nil
            && tally.delivered(id) == Int64(witness.bodySize) && !tally.sawWrongBytes
    }

    func testAHeldTransferDeliversItsAllowanceThenGoesOnWhenAllowedMore() throws {
        let size = 8 << 20
        let server = try LoopbackServer(bodySize: size)
        defer { server.stop() }
        // Another origin's body, several receive buffers long.
        let witness = try LoopbackServer(bodySize: 2 << 20)
        defer { witness.stop() }
        let fetcher = CurlFetcher(clock: .system)
        defer { fetcher.shutdown() }
        let tally = Tally()
        var request = FetchRequest(url: server.url("film.bin"), priority: .readahead)
        request.allowance = 1 << 20
        let id = fetcher.start(request, delegate: tally)

        XCTAssertTrue(tally.wait { $0.delivered(id) >= 1 << 20 })
        // Held: nothing more comes while the network thread moves another
        // transfer from its first byte to its last (rounds, not a clock).
        XCTAssertTrue(runAnotherTransfer(fetcher, from: witness))
        XCTAssertLessThanOrEqual(tally.delivered(id), (1 << 20) + curlPiece)
        XCTAssertTrue(tally.end(id) == nil, "a held transfer does not end")

        fetcher.allow(id, through: 3 << 20)
        XCTAssertTrue(tally.wait { $0.delivered(id) >= 3 << 20 })
        XCTAssertTrue(runAnotherTransfer(fetcher, from: witness))
        XCTAssertLessThanOrEqual(tally.delivered(id), (3 << 20) + curlPiece)

        fetcher.allow(id, through: Int64.max)
        XCTAssertTrue(tally.wait { $0.end(id) != nil })
        XCTAssertEqual(tally.delivered(id), Int64(size))
        XCTAssertEqual(tally.end(id)!?.message, nil)
        XCTAssertFalse(tally.sawWrongBytes)
        XCTAssertEqual(server.requests, 1, "one request for the whole body")
    }

    func testAHeldTransferGivesItsConnectionToAWaitingRead() throws {
        let server = try LoopbackServer(bodySize: 8 << 20)
        defer { server.stop() }
        let fetcher = CurlFetcher(clock: .system)
        defer { fetcher.shutdown() }
        let tally = Tally()
        // Every place of the origin taken by a held transfer.
        let held = (0..<CurlFetcher.maxConnectionsPerHost).map { i -> TransferID in
            var request = FetchRequest(url: server.url("f\(i).bin"), priority: .read)
            request.allowance = 64 << 10
            return fetcher.start(request, delegate: tally)
        }
        XCTAssertTrue(tally.wait { t in held.allSatisfy { t.delivered($0) >= 64 << 10 } })
        XCTAssertTrue(held.allSatisfy { tally.end($0) == nil }, "holding, none ended")

        let read = fetcher.start(FetchRequest(url: server.url("other.bin"), priority: .read), delegate: tally)
        XCTAssertTrue(tally.wait { $0.end(read) != nil }, "the waiting read got a place")
        XCTAssertEqual(tally.end(read)!?.message, nil)
        XCTAssertEqual(tally.delivered(read), 8 << 20)
        let yielded = held.filter { tally.end($0)??.errno == FetchError.yielded }
        XCTAssertGreaterThanOrEqual(yielded.count, 1, "a held transfer gave its place up")
        // For the read, not after the longest hold (which would end it too).
        XCTAssertTrue(yielded.contains { tally.end($0)??.message.contains("waiting read") == true },
                      "\(yielded.map { tally.end($0)??.message ?? "" })")
        for id in yielded {
            XCTAssertLessThanOrEqual(tally.delivered(id), (64 << 10) + curlPiece, "it ended at what it delivered")
        }
        XCTAssertFalse(tally.sawWrongBytes)
    }
}
