// State behind a lock, touched only inside `withLock`: the shape of
// Synchronization's Mutex, over a pthread mutex. ThreadSanitizer (`make
// tsan`) understands pthread mutexes; it does not see the futex under
// Mutex on Linux, and reports the state it guards as racing. Give it the
// state, not Void: TSan reports the inout access to a zero-sized value
// as racing too.
import Foundation

package final class Locked<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    /// Where it comes in the lock order (LockRank.swift); nil: unchecked.
    private let rank: LockRank?

    package init(_ value: Value, rank: LockRank? = nil) {
        self.value = value
        self.rank = rank
    }

    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        HeldRanks.willTake(rank)
        lock.lock()
        HeldRanks.took(rank)
        defer {
            HeldRanks.released(rank)
            lock.unlock()
        }
        return try body(&value)
    }

    /// `body`'s result, or nil without waiting when another thread holds the lock.
    package func withLockIfAvailable<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result? {
        guard lock.try() else { return nil }
        HeldRanks.took(rank)
        defer {
            HeldRanks.released(rank)
            lock.unlock()
        }
        return try body(&value)
    }
}
