// ConditionLocked: state changed by many threads without a lost update, a
// waiter that sees what another thread wrote while it waited, timed waits
// that end at their deadline, and the lock let go while waiting.
import XCTest
@testable import MediaSupport
@testable import MediaTestSupport

final class ConditionLockedTests: XCTestCase {
    func testWithLock_fromManyThreads_losesNoUpdate() {
        let counter = ConditionLocked(0)
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<10_000 { counter.withLock { $0 += 1 } }
        }
        XCTAssertEqual(counter.withLock { $0 }, 80_000)
    }

    func testScopeWait_seesTheStateAnotherThreadSetWhileItWaited() {
        let box = ConditionLocked((ready: false, value: 0, waits: 0))
        // Said with the lock held, which the waiter keeps until its wait lets
        // go of it: whoever holds the lock after this knows it is waiting.
        let waiting = OneShot<Void>()
        Thread {
            box.withScope { scope in
                waiting.fulfil(())
                while !scope.state.ready {
                    scope.state.waits += 1
                    scope.wait()
                }
                scope.state.value += 1
                scope.broadcast()
            }
        }.start()
        XCTAssertNotNil(waiting.wait(until: Deadline.after(seconds: 10, clock: .system)), "the waiter never began")
        box.withLock { state in
            XCTAssertGreaterThanOrEqual(state.waits, 1, "the waiter is not in its wait")
            state.ready = true
            state.value = 41
        }
        box.broadcast()
        let deadline = Deadline.after(seconds: 10, clock: .system)
        let value = box.withScope { scope in
            while scope.state.value != 42 && scope.wait(until: deadline) {}
            return scope.state.value
        }
        XCTAssertEqual(value, 42)
    }

    func testScopeWait_untilADeadline_returnsFalseOnceItPassed() {
        let box = ConditionLocked(0)
        let began = Clock.system.monotonic()
        let deadline = Deadline.after(seconds: 0.2, clock: .system)
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
        // Said with the lock held: the other thread takes it only once the
        // wait has let go of it.
        let waiting = OneShot<Void>()
        let woke = OneShot<[Int]>()
        Thread {
            box.withScope { scope in
                waiting.fulfil(())
                while scope.state.isEmpty { scope.wait() }
                woke.fulfil(scope.state)
            }
        }.start()
        XCTAssertNotNil(waiting.wait(until: Deadline.after(seconds: 10, clock: .system)), "the waiter never began")
        DispatchQueue.global().async {
            box.withLock { $0.append(1) }
            box.broadcast()
            changed.fulfill()
        }
        wait(for: [changed], timeout: 10)
        XCTAssertEqual(woke.wait(until: Deadline.after(seconds: 10, clock: .system)), [1], "the waiter never woke to the change")
        XCTAssertEqual(box.withLock { $0 }, [1])
    }
}
