// A lock with a condition to wait on, whose timed waits run on the
// monotonic clock: Foundation's NSCondition waits until a wall-clock Date,
// so a step of the system's time stretched or cut every read, lookup and
// open deadline. A pthread mutex and a condition variable set to
// CLOCK_MONOTONIC (ThreadSanitizer understands both).
#if canImport(Glibc)
import Glibc
#endif

package final class Condition: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    /// Where it comes in the lock order (LockRank.swift); nil: unchecked.
    private let rank: LockRank?

    package init(rank: LockRank? = nil) {
        self.rank = rank
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    package func lock() {
        HeldRanks.willTake(rank)
        pthread_mutex_lock(mutex)
        HeldRanks.took(rank)
    }

    package func unlock() {
        HeldRanks.released(rank)
        pthread_mutex_unlock(mutex)
    }
    package func broadcast() { pthread_cond_broadcast(condition) }
    package func signal() { pthread_cond_signal(condition) }

    /// Waits for a signal. Call with the lock held.
    package func wait() { pthread_cond_wait(condition, mutex) }

    /// Waits for a signal or the deadline; false once the deadline has
    /// passed. Call with the lock held.
    @discardableResult
    package func wait(until deadline: Deadline) -> Bool {
        let remaining = deadline.remaining
        guard remaining > 0 else { return false }
        var until = Clock.monotonicTimespec(after: remaining)
        pthread_cond_timedwait(condition, mutex, &until)
        return !deadline.hasPassed
    }

    /// `body` with the lock held.
    package func withLock<Result>(_ body: () throws -> Result) rethrows -> Result {
        lock()
        defer { unlock() }
        return try body()
    }
}
