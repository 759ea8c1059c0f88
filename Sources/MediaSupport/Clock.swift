// The mount's one clock. Deadlines, durations and backoff are measured on
// the monotonic clock, which a step of the system's time (NTP, an admin's
// `date -s`) neither stretches nor cuts; only what is stored or shown (last
// access, last validation, dates) reads the wall clock. Tests inject one.
#if canImport(Glibc)
import Glibc
#endif

public struct Clock: Sendable {
    /// Seconds on a monotonic clock (CLOCK_MONOTONIC): for waits and durations.
    package var monotonic: @Sendable () -> Double
    /// Seconds since the epoch: for what is kept on disk or shown to people.
    package var wall: @Sendable () -> Double

    package init(monotonic: @escaping @Sendable () -> Double, wall: @escaping @Sendable () -> Double) {
        self.monotonic = monotonic
        self.wall = wall
    }

    package static let system = Clock(monotonic: { seconds(CLOCK_MONOTONIC) }, wall: { seconds(CLOCK_REALTIME) })

    /// The CLOCK_MONOTONIC moment `seconds` from now, as
    /// pthread_cond_timedwait takes it (Condition's deadline; a year at most).
    static func monotonicTimespec(after seconds: Double) -> timespec {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        let whole = min(max(seconds, 0), 86_400 * 365).rounded(.down)
        var nanoseconds = spec.tv_nsec + Int((min(max(seconds, 0), 86_400 * 365) - whole) * 1e9)
        var total = Int(spec.tv_sec) + Int(whole)
        if nanoseconds >= 1_000_000_000 {
            total += 1
            nanoseconds -= 1_000_000_000
        }
        return timespec(tv_sec: total, tv_nsec: nanoseconds)
    }

    static func seconds(_ id: clockid_t) -> Double {
        var spec = timespec()
        clock_gettime(id, &spec)
        return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
    }
}

/// A moment on a clock's monotonic time by which a wait must end.
package struct Deadline: Sendable {
    /// On `clock.monotonic`.
    package let at: Double
    let clock: Clock

    package init(at: Double, clock: Clock) {
        self.at = at
        self.clock = clock
    }

    package static func after(seconds: Double, clock: Clock) -> Deadline {
        Deadline(at: clock.monotonic() + max(seconds, 0), clock: clock)
    }

    /// A deadline that never passes.
    package static var distantFuture: Deadline { Deadline(at: .infinity, clock: .system) }

    /// Seconds left, 0 once passed.
    package var remaining: Double { max(at - clock.monotonic(), 0) }
    package var hasPassed: Bool { remaining <= 0 }

    /// The earlier of two deadlines.
    package func earlier(_ other: Deadline) -> Deadline { other.at < at ? other : self }
}
