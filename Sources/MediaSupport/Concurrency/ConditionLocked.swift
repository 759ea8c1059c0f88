// State behind a lock with a condition, touched only while the lock is held:
// `Locked`'s shape for state that threads also wait on. `withLock` hands the
// state over inout; `withScope` hands over a scope, through which the state
// is reached one access at a time and which can wait on the condition
// between them. The lock is released while waiting, so no access to the
// state may span a wait: the compiler assumes an inout access excludes every
// other, and could keep a value read before the wait instead of reading what
// another thread wrote meanwhile. The scope cannot leave the closure
// (`~Copyable`, only borrowed). Over `Condition`: a pthread mutex and a
// CLOCK_MONOTONIC condition variable, both understood by ThreadSanitizer.
// The state lives in memory of its own: as a stored property of this
// generic class, ThreadSanitizer took the scope's accesses to it for writes
// to the object's header, which every call reads before taking the lock.
package final class ConditionLocked<State>: @unchecked Sendable {
    private let condition: Condition
    private let state: UnsafeMutablePointer<State>

    package init(_ state: State, rank: LockRank? = nil) {
        condition = Condition(rank: rank)
        self.state = UnsafeMutablePointer<State>.allocate(capacity: 1)
        self.state.initialize(to: state)
    }

    deinit {
        state.deinitialize(count: 1)
        state.deallocate()
    }

    /// `body` with the lock held and the state.
    package func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        condition.lock()
        defer { condition.unlock() }
        return try body(&state.pointee)
    }

    /// `body` with the lock held, reaching the state and the condition
    /// through `scope`.
    package func withScope<Result>(_ body: (borrowing Scope) throws -> Result) rethrows -> Result {
        condition.lock()
        defer { condition.unlock() }
        return try body(Scope(owner: self))
    }

    /// Wakes every waiter. Waiters check their state again under the lock,
    /// so a broadcast after the lock was let go wakes them all the same.
    package func broadcast() { condition.broadcast() }

    /// Wakes one waiter.
    package func signal() { condition.signal() }

    /// The lock held: the state, and waits on the condition.
    package struct Scope: ~Copyable {
        private let owner: ConditionLocked

        fileprivate init(owner: ConditionLocked) {
            self.owner = owner
        }

        /// The state; each use an access of its own, none across a wait.
        package var state: State {
            _read { yield owner.state.pointee }
            nonmutating _modify { yield &owner.state.pointee }
        }

        /// Lets go of the lock until woken, then holds it again.
        package func wait() { owner.condition.wait() }

        /// `wait()`, or until the deadline; false once it has passed.
        @discardableResult
        package func wait(until deadline: Deadline) -> Bool { owner.condition.wait(until: deadline) }

        package func broadcast() { owner.condition.broadcast() }

        package func signal() { owner.condition.signal() }
    }
}
