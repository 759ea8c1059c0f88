// The room the cache limits leave for new bytes, kept at every instant
// rather than every eviction pass (at 1 GB/s a 5 s pass is 5 GB over).
// A transfer reserves room for its bytes when it starts; a read that must
// fetch first waits (for one eviction pass at most) until there is room for
// it; readahead and preload only fetch what fits. Bytes that find no room
// still reach their readers, uncached, unless a read waits on them: those
// are cached past the room (`overdraw`), since dropping them would leave
// the newest file short while older ones stay, and the pass they wake makes
// up for them (a read that finds the room overdrawn waits for that pass
// first, so the overdraft is a few reads' worth).
// The evictor is woken when the room runs low, so it frees older bytes
// before writes find none.
//
// When the limits leave no room however much is evicted (a disk with less
// free than `--cache-min-free`, pinned files over the size limit), the
// cache passes bytes through: nothing is reserved, taken or overdrawn, no
// read waits for a pass and none wakes one; the timed passes still measure,
// so caching resumes by itself when room returns (decision 0046).
//
// The evictor measures the room on each pass; bytes reserved, or written
// while it measured, are taken off, so a measurement can only err low.
//
// A library scan's bytes (ReadClass.scan) fit in the room of both: the
// whole cache's and the scan budget's (`--scan-cache-size`). A scan that
// finds no room presses only the scan budget, whose pass evicts only
// entries scans alone brought: a scan never makes the evictor free bytes
// a player fetched.
import Foundation
import MediaSupport

public final class CacheBudget: Sendable {
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
        /// The same for the scan budget: its bytes count in both.
        var scanRoom: Int64 = 0
        var scanCommitted: Int64 = 0
        var scanWritten: Int64 = 0
        var scanLowWater: Int64 = 0
        var scanPressed = false
        /// Measurements so far: a reader waits for one pass at most.
        var passes = 0
        /// The last pass found no room to make: new bytes pass uncached.
        var passesThrough = false
        /// Reads whose wait for room ended at its deadline with no pass:
        /// each held a read for nothing (`counts`).
        var unansweredWaits = 0
    }

    /// Readers waiting for room wait on it.
    private let state = ConditionLocked(State(), rank: .budget)
    /// Called when the room ran low: the evictor should run now. Called
    /// with no lock of the budget's held; it must not block.
    private let onPressure: @Sendable () -> Void

    public init(onPressure: @escaping @Sendable () -> Void) {
        self.onPressure = onPressure
    }

    private func locked<T>(_ body: (inout State) -> T) -> T {
        state.withLock(body)
    }

    /// Marks the pressure (once per pass) and says whether to wake the
    /// evictor: a scan's shortage presses the scan budget alone.
    private static func press(_ state: inout State, short: Bool, _ readClass: ReadClass) -> Bool {
        // No pass can make room: the timed one looks for it coming back.
        if state.passesThrough { return false }
        if !readClass.plays {
            guard !state.scanPressed, short || state.scanRoom < state.scanLowWater else { return false }
            state.scanPressed = true
            return true
        }
        guard !state.pressed, short || state.room < state.lowWater else { return false }
        state.pressed = true
        return true
    }

    /// The room bytes of `readClass` may take.
    private static func room(_ state: State, _ readClass: ReadClass) -> Int64 {
        !readClass.plays ? min(state.room, state.scanRoom) : state.room
    }

    /// Reserves room for up to `count` bytes; returns how much it got.
    func reserve(upTo count: Int64, for readClass: ReadClass = .play) -> Int64 {
        let (got, wake) = locked { state -> (Int64, Bool) in
            let got = max(min(count, Self.room(state, readClass)), 0)
            state.room -= got
            state.committed += got
            if !readClass.plays {
                state.scanRoom -= got
                state.scanCommitted += got
            }
            return (got, Self.press(&state, short: got < count, readClass))
        }
        if wake { onPressure() }
        return got
    }

    /// Reserved bytes were written into the cache.
    func consume(_ count: Int64, for readClass: ReadClass = .play) {
        locked { state in
            state.committed -= count
            state.written &+= count
            if !readClass.plays {
                state.scanCommitted -= count
                state.scanWritten &+= count
            }
        }
    }

    /// Reserved bytes that will not be written after all.
    func release(_ count: Int64, for readClass: ReadClass = .play) {
        guard count > 0 else { return }
        locked { state in
            state.committed -= count
            state.room = state.room.addingSaturating(count)
            if !readClass.plays {
                state.scanCommitted -= count
                state.scanRoom = state.scanRoom.addingSaturating(count)
            }
        }
    }

    /// Takes room for bytes no reservation covers; false when they do not fit.
    func take(_ count: Int64, for readClass: ReadClass = .play) -> Bool {
        let (fits, wake) = locked { state -> (Bool, Bool) in
            let fits = Self.room(state, readClass) >= count
            if fits {
                state.room -= count
                state.written &+= count
                if !readClass.plays {
                    state.scanRoom -= count
                    state.scanWritten &+= count
                }
            }
            return (fits, Self.press(&state, short: !fits, readClass))
        }
        if wake { onPressure() }
        return fits
    }

    /// Takes room for bytes a read waits on, past what is left if need be
    /// (the room goes below zero), and wakes the evictor when it ran low.
    /// False (nothing taken) while the cache passes bytes through.
    @discardableResult
    func overdraw(_ count: Int64, for readClass: ReadClass = .play) -> Bool {
        let (taken, wake) = locked { state -> (Bool, Bool) in
            let short = Self.room(state, readClass) < count
            guard !state.passesThrough || !short else { return (false, Self.press(&state, short: true, readClass)) }
            state.room -= count
            state.written &+= count
            if !readClass.plays {
                state.scanRoom -= count
                state.scanWritten &+= count
            }
            return (true, Self.press(&state, short: short, readClass))
        }
        if wake { onPressure() }
        return taken
    }

    /// Waits until `count` bytes fit, for one eviction pass and `timeout`
    /// at most: a read that must fetch gives the evictor the chance to free
    /// older bytes first. Returns whether they fit.
    @discardableResult
    func awaitRoom(_ count: Int64, until deadline: Deadline, for readClass: ReadClass = .play) -> Bool {
        enum Start { case fits, passesThrough, wait(wake: Bool, pass: Int) }
        let start: Start = locked { state in
            guard Self.room(state, readClass) < count else { return .fits }
            // No pass would make room: the read goes on, uncached, at once.
            if state.passesThrough { return .passesThrough }
            return .wait(wake: Self.press(&state, short: true, readClass), pass: state.passes)
        }
        let (wake, pass): (Bool, Int)
        switch start {
        case .fits: return true
        case .passesThrough: return false
        case .wait(let pressed, let passes): (wake, pass) = (pressed, passes)
        }
        if wake { onPressure() }
        return state.withScope { scope in
            while Self.room(scope.state, readClass) < count && scope.state.passes <= pass + (wake ? 0 : 1) {
                if !scope.wait(until: deadline) { break }
            }
            if scope.state.passes == pass { scope.state.unansweredWaits += 1 }
            return Self.room(scope.state, readClass) >= count
        }
    }

    /// Passes measured so far, and reads whose wait for room no pass
    /// answered (the evictor was not run: a bug, or a stopping mount).
    public var counts: (passes: Int, unansweredWaits: Int) { locked { ($0.passes, $0.unansweredWaits) } }

    /// Whether new bytes pass uncached, with no pass run for them.
    public var passesThrough: Bool { locked { $0.passesThrough } }

    /// Whether the room ran low since the last measurement.
    public var isPressed: Bool { locked { $0.pressed } }

    /// Whether reads took more than the last pass measured (`overdraw`).
    var isOverdrawn: Bool { locked { $0.room < 0 } }

    /// Whether the scan budget's room ran low since the last measurement.
    public var isScanPressed: Bool { locked { $0.scanPressed } }

    /// A mark to pass to `measured(room:since:lowWater:)`, taken before measuring.
    public var mark: Int64 { locked { $0.written } }

    /// The same for the scan budget's bytes.
    public var scanMark: Int64 { locked { $0.scanWritten } }

    /// The evictor measured `room` (bytes free under every limit on disk),
    /// having started at `mark`; it wants to be woken when less than
    /// `lowWater` is left. `scan`: the same of the scan budget (nil: scans
    /// take any room). `passesThrough`: no pass can make room now.
    public func measured(room: Int64, since mark: Int64, lowWater: Int64,
                         scan: (room: Int64, since: Int64, lowWater: Int64)? = nil, passesThrough: Bool = false) {
        locked { state in
            state.passesThrough = passesThrough
            state.room = max(room - state.committed - (state.written &- mark), 0)
            state.lowWater = lowWater
            state.pressed = false
            if let scan {
                state.scanRoom = max(scan.room - state.scanCommitted - (state.scanWritten &- scan.since), 0)
                state.scanLowWater = scan.lowWater
            } else {
                state.scanRoom = Int64.max
                state.scanLowWater = 0
            }
            state.scanPressed = false
            state.passes += 1
        }
        state.broadcast()
    }
}
