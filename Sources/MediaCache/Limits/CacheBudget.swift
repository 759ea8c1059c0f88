// The room the cache limits leave for new bytes, kept at every instant
// rather than every eviction pass (at 1 GB/s a 5 s pass is 5 GB over).
// A transfer reserves room for its bytes when it starts; a read that must
// fetch first waits (for one eviction pass at most) until there is room for
// it; readahead and preload only fetch what fits. Bytes that find no room
// still reach their readers, uncached. The evictor is woken when the room
// runs low, so it frees older bytes before writes find none.
//
// The evictor measures the room on each pass; bytes reserved, or written
// while it measured, are taken off, so a measurement can only err low.
import Foundation

public final class CacheBudget: @unchecked Sendable {
    private struct State {
        /// Bytes that may still be reserved before a limit is reached.
        var room: Int64 = 0
        /// Reserved for transfers and not yet written or given back.
        var committed: Int64 = 0
        /// Every byte ever written into the cache, to discount those
        /// written while a measurement ran.
        var written: Int64 = 0
        /// Below this much room the evictor is woken.
        var lowWater: Int64 = 0
        var pressed = false
        /// Measurements so far: a reader waits for one pass at most.
        var passes = 0
    }

    /// Guards `state`; readers waiting for room wait on it.
    private let condition = Condition()
    private var state = State()
    /// Called when the room ran low: the evictor should run now. Called
    /// with no lock of the budget's held; it must not block.
    private let onPressure: @Sendable () -> Void

    public init(onPressure: @escaping @Sendable () -> Void) {
        self.onPressure = onPressure
    }

    private func locked<T>(_ body: (inout State) -> T) -> T {
        condition.lock()
        defer { condition.unlock() }
        return body(&state)
    }

    /// Marks the pressure (once per pass) and says whether to wake the evictor.
    private static func press(_ state: inout State, short: Bool) -> Bool {
        guard !state.pressed, short || state.room < state.lowWater else { return false }
        state.pressed = true
        return true
    }

    /// Reserves room for up to `count` bytes; returns how much it got.
    func reserve(upTo count: Int64) -> Int64 {
        let (got, wake) = locked { state -> (Int64, Bool) in
            let got = max(min(count, state.room), 0)
            state.room -= got
            state.committed += got
            return (got, Self.press(&state, short: got < count))
        }
        if wake { onPressure() }
        return got
    }

    /// Reserved bytes were written into the cache.
    func consume(_ count: Int64) {
        locked { state in
            state.committed -= count
            state.written &+= count
        }
    }

    /// Reserved bytes that will not be written after all.
    func release(_ count: Int64) {
        guard count > 0 else { return }
        locked { state in
            state.committed -= count
            state.room = state.room.addingSaturating(count)
        }
    }

    /// Takes room for bytes no reservation covers; false when they do not fit.
    func take(_ count: Int64) -> Bool {
        let (fits, wake) = locked { state -> (Bool, Bool) in
            let fits = state.room >= count
            if fits {
                state.room -= count
                state.written &+= count
            }
            return (fits, Self.press(&state, short: !fits))
        }
        if wake { onPressure() }
        return fits
    }

    /// Waits until `count` bytes fit, for one eviction pass and `timeout`
    /// at most: a read that must fetch gives the evictor the chance to free
    /// older bytes first. Returns whether they fit.
    @discardableResult
    func awaitRoom(_ count: Int64, timeout: Double) -> Bool {
        condition.lock()
        guard state.room < count else { condition.unlock(); return true }
        let wake = Self.press(&state, short: true)
        let pass = state.passes
        condition.unlock()
        if wake { onPressure() }
        let deadline = Deadline.after(seconds: timeout)
        condition.lock()
        defer { condition.unlock() }
        while state.room < count && state.passes <= pass + (wake ? 0 : 1) {
            if !condition.wait(until: deadline) { break }
        }
        return state.room >= count
    }

    /// Whether the room ran low since the last measurement.
    public var isPressed: Bool { locked { $0.pressed } }

    /// A mark to pass to `measured(room:since:lowWater:)`, taken before measuring.
    public var mark: Int64 { locked { $0.written } }

    /// The evictor measured `room` (bytes free under every limit on disk),
    /// having started at `mark`; it wants to be woken when less than
    /// `lowWater` is left.
    public func measured(room: Int64, since mark: Int64, lowWater: Int64) {
        locked { state in
            state.room = max(room - state.committed - (state.written &- mark), 0)
            state.lowWater = lowWater
            state.pressed = false
            state.passes += 1
        }
        condition.broadcast()
    }
}
