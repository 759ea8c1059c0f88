// A named long-lived thread that runs jobs one after another. Work that must
// not run on the caller's thread (kernel invalidations, preloads) goes here
// rather than to a thread per event, so that at unmount there is one thread
// to drain and join, and none outlives the FUSE session.
import Foundation

package final class Worker: @unchecked Sendable {
    private let name: String
    private let condition = Condition(rank: .worker)
    // Guarded by `condition`.
    private var jobs: [@Sendable () -> Void] = []
    private var started = false
    private var stopping = false
    private var finished = false

    package init(name: String) {
        self.name = name
    }

    /// Queues `job`; returns false (and drops it) once the worker is stopping.
    @discardableResult
    package func submit(_ job: @escaping @Sendable () -> Void) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard !stopping else { return false }
        jobs.append(job)
        if !started {
            started = true
            let thread = Thread { [self] in run() }
            thread.name = name
            thread.start()
        }
        condition.broadcast()
        return true
    }

    /// Refuses new jobs, runs (`drain`) or drops the queued ones, and returns
    /// once the thread has left its loop. Safe to call more than once.
    package func stop(drain: Bool) {
        condition.lock()
        defer { condition.unlock() }
        stopping = true
        if !drain { jobs.removeAll() }
        condition.broadcast()
        while started && !finished { condition.wait() }
    }

    private func run() {
        condition.lock()
        while true {
            if jobs.isEmpty {
                if stopping { break }
                condition.wait()
                continue
            }
            var job: (@Sendable () -> Void)? = jobs.removeFirst()
            condition.unlock()
            job?()
            // Its captures are let go here, with no lock held: a deinit they
            // end may take locks (a CacheStore's stops its trash worker, which
            // takes that worker's condition). Released after `lock()`, as the
            // end of the loop body did, they ran under this worker's
            // condition; the lock-rank check found it.
            job = nil
            condition.lock()
        }
        finished = true
        condition.broadcast()
        condition.unlock()
    }
}
