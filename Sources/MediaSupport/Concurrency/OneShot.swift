// A value given once and waited for on other threads, on the monotonic
// clock: a probe's answer, a refresh's outcome. The first `fulfil` wins;
// later ones are ignored, so a late answer never replaces the one a waiter
// saw.
package final class OneShot<Value: Sendable>: @unchecked Sendable {
    private let condition = Condition()
    /// Guarded by `condition`.
    private var stored: Value?

    package init() {}

    /// Gives the value and wakes every waiter; false if it was given already.
    @discardableResult
    package func fulfil(_ value: Value) -> Bool {
        condition.withLock {
            guard stored == nil else { return false }
            stored = value
            condition.broadcast()
            return true
        }
    }

    /// The value, or nil if none came by `deadline`.
    package func wait(until deadline: Deadline) -> Value? {
        condition.withLock {
            while stored == nil && condition.wait(until: deadline) {}
            return stored
        }
    }

    /// The value if it was given, without waiting.
    package var value: Value? {
        condition.withLock { stored }
    }
}
