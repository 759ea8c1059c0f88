// CurlFetcher against a real loopback server: thousands of queued probes
// (a listing's entries) and reads are admitted up to the per-origin limit,
// no further, and every one completes; queued transfers hold no buffers.
import Foundation
import XCTest
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport

final class CurlFetcherAdmissionTests: XCTestCase {
    /// Counts completions; waits for a number of them.
    final class Counter: TransferDelegate, @unchecked Sendable {
        private let condition = NSCondition()
        private var completed = 0
        private var failures: [String] = []

        func transfer(_ id: TransferID, receiveHead head: ResponseHead) -> Bool { true }
        func transfer(_ id: TransferID, receiveBody bytes: UnsafeRawBufferPointer) -> Bool { true }
        func transfer(_ id: TransferID, completeWith error: MediaError?) {
            condition.withLock {
                completed += 1
                if let error { failures.append(error.message) }
                condition.broadcast()
            }
        }

        /// Whether `count` completed within `seconds` (a bound against a hang only).
        func wait(for count: Int, seconds: Double) -> (done: Int, failures: [String]) {
            let deadline = Date(timeIntervalSinceNow: seconds)
            condition.lock()
            defer { condition.unlock() }
            while completed < count && condition.wait(until: deadline) {}
            return (completed, failures)
        }
    }

    func testThousandsOfQueuedProbesAndReadsAreAdmittedUpToTheOriginsLimitAndAllComplete() throws {
        let server = try LoopbackServer()
        defer { server.stop() }
        let fetcher = CurlFetcher(clock: .system)
        defer { fetcher.shutdown() }
        let counter = Counter()
        let probes = 3000, reads = 40
        server.hold(true)
        for i in 0..<probes {
            fetcher.start(FetchRequest(url: server.url("f\(i).bin"), method: .head, priority: .probe), delegate: counter)
        }
        for i in 0..<reads {
            fetcher.start(FetchRequest(url: server.url("r\(i % 4).bin"), range: 0..<5), delegate: counter)
        }
        XCTAssertTrue(server.wait(seconds: 30) { _, serving in serving == CurlFetcher.maxConnectionsPerHost },
                      "the fetcher fills the origin's places (\(server.serving) of \(CurlFetcher.maxConnectionsPerHost))")
        server.hold(false)
        let (done, failures) = counter.wait(for: probes + reads, seconds: 120)
        XCTAssertEqual(done, probes + reads, "every queued transfer completes")
        XCTAssertEqual(failures, [])
        XCTAssertEqual(server.requests, probes + reads)
        XCTAssertEqual(server.mostServing, CurlFetcher.maxConnectionsPerHost, "never more than the origin's places")
    }
}
