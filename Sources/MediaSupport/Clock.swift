// The mount's one clock. Deadlines, durations and backoff are measured on
// the monotonic clock, which a step of the system's time (NTP, an admin's
// `date -s`) neither stretches nor cuts; only what is stored or shown (last
// access, last validation, dates) reads the wall clock. Tests inject one.
#if canImport(Glibc)
import Glibc
#endif

public struct Clock: Sendable {
    /// Seconds on a monotonic clock (CLOCK_MONOTONIC): for waits and durations.
    public var monotonic: @Sendable () -> Double
    /// Seconds since the epoch: for what is kept on disk or shown to people.
    public var wall: @Sendable () -> Double

    public init(monotonic: @escaping @Sendable () -> Double, wall: @escaping @Sendable () -> Double) {
        self.monotonic = monotonic
        self.wall = wall
    }

    public static let system = Clock(monotonic: { seconds(CLOCK_MONOTONIC) }, wall: { seconds(CLOCK_REALTIME) })

    static func seconds(_ id: clockid_t) -> Double {
        var spec = timespec()
        clock_gettime(id, &spec)
        return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
    }
}

/// A moment on a clock's monotonic time by which a wait must end.
public struct Deadline: Sendable {
    /// On `clock.monotonic`.
    public let at: Double
    let clock: Clock

    public init(at: Double, clock: Clock) {
        self.at = at
        self.clock = clock
    }

    public static func after(seconds: Double, clock: Clock = .system) -> Deadline {
        Deadline(at: clock.monotonic() + max(seconds, 0), clock: clock)
    }

    /// A deadline that never passes.
    public static var distantFuture: Deadline { Deadline(at: .infinity, clock: .system) }

    /// Seconds left, 0 once passed.
    public var remaining: Double { max(at - clock.monotonic(), 0) }
    public var hasPassed: Bool { remaining <= 0 }

    /// The earlier of two deadlines.
    public func earlier(_ other: Deadline) -> Deadline { other.at < at ? other : self }
}
