// ConditionLocked: state changed by many threads without a lost update, a
// waiter that sees what another thread wrote while it waited, timed waits
// that end at their deadline, and the lock let go while waiting.
import XCTest
@testable import MediaSupport

final class ConditionLockedTests: XCTestCase {
    func testWithLock_fromManyThreads_losesNoUpdate() {
        let counter = ConditionLocked(0)
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<10_000 { counter.withLock { $0 += 1 } }
        }
        XCTAssertEqual(counter.withLock { $0 }, 80_000)
    }

    func testScopeWait_seesTheStateAnotherThreadSetWhileItWaited() {
        let box = ConditionLocked((ready: false, value: 0))
        Thread {
            box.withScope { scope in
                while !scope.state.ready { scope.wait() }
                scope.state.value += 1
                scope.broadcast()
            }
        }.start()
        Thread.sleep(forTimeInterval: 0.05)
        box.withLock { $0 = (ready: true, value: 41) }
        box.broadcast()
        let deadline = Deadline.after(seconds: 10)
        let value = box.withScope { scope in
            while scope.state.value != 42 && scope.wait(until: deadline) {}
            return scope.state.value
        }
        XCTAssertEqual(value, 42)
    }

    func testScopeWait_untilADeadline_returnsFalseOnceItPassed() {
        let box = ConditionLocked(0)
        let began = Clock.system.monotonic()
        let deadline = Deadline.after(seconds: 0.2)
        let woken = box.withScope { scope in
            var woken = 0
            while scope.wait(until: deadline) { woken += 1 }
            return woken
        }
        let waited = Clock.system.monotonic() - began
        XCTAssertGreaterThanOrEqual(waited, 0.19)
        XCTAssertLessThan(waited, 5)
        XCTAssertLessThanOrEqual(woken, 1)
    }

    func testScopeWait_letsGoOfTheLock_soAnotherThreadCanChangeTheState() {
        let box = ConditionLocked([Int]())
        let changed = expectation(description: "changed while the other waited")
        let waiting = ConditionLocked(false)
        Thread {
            box.withScope { scope in
                waiting.withLock { $0 = true }
                while scope.state.isEmpty { scope.wait() }
            }
        }.start()
        while !waiting.withLock({ $0 }) { usleep(1_000) }
        DispatchQueue.global().async {
            box.withLock { $0.append(1) }
            box.broadcast()
            changed.fulfill()
        }
        wait(for: [changed], timeout: 10)
        XCTAssertEqual(box.withLock { $0 }, [1])
    }
}
