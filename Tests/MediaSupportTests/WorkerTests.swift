// The serial worker: jobs in order on one thread of its own, started by the
// first job, drained or dropped at stop, refused after it, and the thread
// gone once stop returns.
import Foundation
import XCTest
@testable import MediaSupport
@testable import MediaTestSupport
#if canImport(Glibc)
import Glibc
#endif

final class WorkerTests: XCTestCase {
    /// The calling thread's id (from /proc/thread-self: "<pid>/task/<tid>").
    private static func threadID() -> String {
        ((try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self")) ?? "")
            .split(separator: "/").last.map(String.init) ?? ""
    }

    /// The ids of this process's threads now.
    private func threadIDs() -> Set<String> {
        Set((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? [])
    }

    func testJobs_runInTheOrderSubmitted_allOnOneThreadNotTheCallers() {
        let worker = Worker(name: "worker-order")
        let seen = Locked<[(Int, String)]>([])
        for i in 0..<100 {
            XCTAssertTrue(worker.submit { seen.withLock { $0.append((i, Self.threadID())) } })
        }
        worker.stop(drain: true)
        let jobs = seen.withLock { $0 }
        XCTAssertEqual(jobs.map(\.0), Array(0..<100))
        XCTAssertEqual(Set(jobs.map(\.1)).count, 1)
        XCTAssertNotEqual(jobs.first?.1, Self.threadID())
        XCTAssertNotEqual(jobs.first?.1, "")
    }

    func testTheThread_startsWithTheFirstJob_notAtInit_andIsGoneOnceStopReturns() throws {
        let worker = Worker(name: "worker-life")
        // A thread started at init would be listed already: pthread_create
        // returns once the kernel made it.
        let before = threadIDs()
        let ran = Locked<String?>(nil)
        worker.submit { ran.withLock { $0 = Self.threadID() } }
        worker.stop(drain: true)
        let thread = try XCTUnwrap(ran.withLock { $0 })
        XCTAssertFalse(before.contains(thread), "the thread was there before the first job")
        // stop returns once the thread left its loop; it exits right after.
        XCTAssertTrue(eventually { !threadIDs().contains(thread) }, "the worker's thread outlived stop")
    }

    func testStop_withDrain_runsEveryQueuedJobBeforeReturning() {
        let worker = Worker(name: "worker-drain")
        let gate = DispatchSemaphore(value: 0)
        let count = Locked(0)
        worker.submit { gate.wait() }
        for _ in 0..<10 { worker.submit { count.withLock { $0 += 1 } } }
        let stopping = Background { worker.stop(drain: true) }
        // Refusing new jobs tells that stop has begun.
        XCTAssertTrue(eventually { !worker.submit({}) }, "stop never began")
        gate.signal()
        XCTAssertNoThrow(try stopping.result())
        XCTAssertEqual(count.withLock { $0 }, 10)
    }

    func testStop_withoutDrain_dropsTheQueuedJobs_andWaitsForTheRunningOne() {
        let worker = Worker(name: "worker-drop")
        let gate = DispatchSemaphore(value: 0)
        let finished = Locked(false)
        let dropped = Locked(0)
        let running = DispatchSemaphore(value: 0)
        worker.submit {
            running.signal()
            gate.wait()
            finished.withLock { $0 = true }
        }
        XCTAssertEqual(running.wait(timeout: .now() + 5), .success)
        for _ in 0..<10 { worker.submit { dropped.withLock { $0 += 1 } } }
        let stopping = Background { worker.stop(drain: false) }
        XCTAssertTrue(eventually { !worker.submit({ dropped.withLock { $0 += 1 } }) }, "stop never began")
        gate.signal()
        XCTAssertNoThrow(try stopping.result())
        XCTAssertTrue(finished.withLock { $0 }, "stop returned before the running job ended")
        XCTAssertEqual(dropped.withLock { $0 }, 0)
    }

    func testSubmit_afterStop_isRefused_andTheJobNeverRuns() {
        let worker = Worker(name: "worker-late")
        worker.submit {}
        worker.stop(drain: true)
        let ran = Locked(false)
        // The refused job is let go of at once: nothing keeps it to run later.
        final class Token: Sendable {}
        var token: Token? = Token()
        weak let held = token
        XCTAssertFalse(worker.submit { [token] in
            withExtendedLifetime(token) { ran.withLock { $0 = true } }
        })
        token = nil
        XCTAssertNil(held, "the worker kept the refused job")
        XCTAssertFalse(ran.withLock { $0 })
    }

    func testStop_ofAWorkerNeverGivenAJob_returnsAtOnce_andStartsNoThread() {
        let before = threadIDs()
        let worker = Worker(name: "worker-idle")
        worker.stop(drain: true)
        worker.stop(drain: false)
        XCTAssertFalse(worker.submit {})
        XCTAssertTrue(threadIDs().isSubset(of: before), "a thread started: \(threadIDs().subtracting(before))")
    }

    func testAJob_maySubmitAnother_whichRunsAfterIt() {
        let worker = Worker(name: "worker-chain")
        let order = Locked<[String]>([])
        let done = DispatchSemaphore(value: 0)
        worker.submit {
            worker.submit {
                order.withLock { $0.append("second") }
                done.signal()
            }
            order.withLock { $0.append("first") }
        }
        XCTAssertEqual(done.wait(timeout: .now() + 5), .success)
        worker.stop(drain: true)
        XCTAssertEqual(order.withLock { $0 }, ["first", "second"])
    }
}
