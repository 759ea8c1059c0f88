// The catalog's background thread: it persists metadata, turns idle loaders
// back into records and applies the cache limits, every `interval`, sooner
// while there is a backlog (a listing's probed entries), and at once when a
// write found no room under the limits. It owns only the timing; what a
// pass does is CatalogMaintenance's.
//
// Lock: `state` guards `stopped` and `running`; a pass runs without it.
import Foundation
import MediaSupport

final class Flusher: Sendable {
    /// What a pass left to do, which says when the next one comes.
    enum Backlog {
        case none
        /// Probe answers wait to be saved: back after `saveSlice`.
        case answers
        /// Loaders to turn into records: back after `backlogInterval`.
        case loaders
    }

    /// How often a full pass (flush and limits) runs.
    let interval: Double
    /// With loaders to turn into records, the flusher comes back this often.
    static let backlogInterval: Double = 1
    /// With answers waiting, it comes back this soon.
    static let saveSlice: Double = 0.5

    /// Whether it was asked to stop, and whether its thread runs; waits
    /// for the next pass and for the thread's end are on its condition.
    private struct State {
        var stopped = false
        var running = false
    }
    private let state = ConditionLocked(State(), rank: .flusher)

    /// The mount's clock: the passes are timed on it.
    private let clock: Clock

    init(interval: Double, clock: Clock) {
        self.interval = interval
        self.clock = clock
    }

    /// Starts the thread: `prologue` once, then `pass(flushDue, pressed)`
    /// until `stop`. `isPressed` says whether writes wait for room now: then
    /// the flusher does not sleep (it asks holding the flusher's lock: the
    /// budget's is taken under it).
    func start(prologue: @escaping @Sendable () -> Void,
               pass: @escaping @Sendable (_ flushDue: Bool, _ pressed: Bool) -> Backlog,
               isPressed: @escaping @Sendable () -> Bool) {
        state.withLock { $0.running = true }
        let thread = Thread { [self] in
            prologue()
            var flushDue = Deadline.after(seconds: interval, clock: clock)
            var wake = flushDue
            while true {
                let stop = state.withScope { scope -> Bool in
                    if scope.state.stopped { return true }
                    if !isPressed() { _ = scope.wait(until: wake) }
                    return scope.state.stopped
                }
                if stop { break }
                let due = flushDue.hasPassed
                if due { flushDue = Deadline.after(seconds: interval, clock: clock) }
                switch pass(due, isPressed()) {
                case .none: wake = flushDue
                case .answers: wake = Deadline.after(seconds: Self.saveSlice, clock: clock)
                case .loaders: wake = flushDue.earlier(Deadline.after(seconds: Self.backlogInterval, clock: clock))
                }
            }
            state.withScope { scope in
                scope.state.running = false
                scope.broadcast()
            }
        }
        thread.name = "mediafs-flush"
        thread.start()
    }

    /// Has the next pass run now.
    func wake() {
        state.withScope { $0.broadcast() }
    }

    /// Stops the thread after the pass under way; returns once it has left.
    /// Safe to call twice, or without `start`.
    func stop() {
        state.withScope { scope in
            scope.state.stopped = true
            scope.broadcast()
            while scope.state.running { scope.wait() }
        }
    }
}
