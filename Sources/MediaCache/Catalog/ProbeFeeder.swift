// The background probes of listed entries, a bounded number at a time. A
// listing of 100,000 files is followed by a stat of each, so every entry of
// unknown size is probed, but queueing them all at once held a request, a
// probe and a transfer per entry (tens of megabytes, left fragmented in the
// heap once they ended). Here they wait as a URL each, and the next
// starts when one settles. A stat that comes first probes its entry itself,
// and the feeder then finds it known (or its probe running) and skips it.
import Foundation
import MediaSupport

final class ProbeFeeder: Sendable {
    /// Probes started and not settled; more than the fetcher's places for
    /// one origin, so its queue never runs dry between two rounds.
    static let outstanding = 64

    typealias Start = @Sendable (String, @escaping @Sendable () -> Void) -> Bool
    typealias StartWithoutWaiting = @Sendable (String, @escaping @Sendable () -> Void) -> Bool?

    private struct State {
        var queue = FIFO<String>()
        /// Starts a URL's probe unless it is known or being probed; returns
        /// whether it did (then it calls the closure once the probe settled).
        var start: Start = { _, _ in false }
        /// The same without waiting for any lock: nil when it would have had to
        /// (the URL is then kept for the next `pump`).
        var startWithoutWaiting: StartWithoutWaiting?
        /// A URL whose start without waiting found a lock taken; it goes first.
        var held: String?
        /// Told when the last probe waiting or running settled.
        var onDrained: @Sendable () -> Void = {}
        var running = 0
        var stopped = false
        /// Every probe handed to it settled since `takeDrained` was last asked.
        var drained = false

        mutating func popNext() -> String? {
            if let next = held {
                held = nil
                return next
            }
            return queue.popFirst()
        }
    }

    /// A leaf: the closures are called with it let go.
    private let state = Locked(State(), rank: .probeFeeder)
    private let limit: Int

    init(outstanding: Int = ProbeFeeder.outstanding) {
        limit = outstanding
    }

    /// What starts a probe, and what hears that none is left; set once,
    /// before the first `add`.
    func starting(with start: @escaping Start, withoutWaiting: StartWithoutWaiting? = nil,
                  whenDrained: @escaping @Sendable () -> Void = {}) {
        state.withLock { state in
            state.start = start
            state.startWithoutWaiting = withoutWaiting
            state.onDrained = whenDrained
        }
    }

    /// Probes these URLs' content info in the background, in order, after
    /// those already waiting.
    func add(_ urls: [String]) {
        state.withLock { state in
            for url in urls { state.queue.append(url) }
        }
        pump()
    }

    /// No probe starts from now on; what waits is dropped.
    func stop() {
        state.withLock { state in
            state.stopped = true
            state.queue = FIFO()
            state.held = nil
        }
    }

    /// Waiting entries, for tests.
    var waiting: Int {
        state.withLock { $0.queue.count + ($0.held == nil ? 0 : 1) }
    }

    /// The next URL to start and what starts it, counted as running; nil
    /// when stopped, at the limit or out of URLs.
    private func takeNext() -> (url: String, start: Start, withoutWaiting: StartWithoutWaiting?)? {
        let limit = self.limit
        return state.withLock { state in
            guard !state.stopped, state.running < limit, let next = state.popNext() else { return nil }
            state.running += 1
            return (next, state.start, state.startWithoutWaiting)
        }
    }

    /// Starts probes while fewer than the limit run, with the lock let go:
    /// a probe's completion calls `settled`.
    func pump() {
        while let (next, start, _) = takeNext() {
            if !start(next, { [weak self] in self?.settled() }) {
                // Known already, or a lookup's probe runs: nothing to wait
                // for; if it was the last, the run has ended all the same.
                endOne()
            }
        }
    }

    private func settled() {
        endOne()
        pump()
    }

    /// A probe settled on a thread that must not wait for a lock (the
    /// network thread): the next ones start there if no lock is taken.
    /// False when one was (or no start without waiting is set): `pump`
    /// must then run elsewhere.
    func settledWithoutWaiting() -> Bool {
        endOne()
        guard state.withLock({ $0.startWithoutWaiting != nil }) else { return false }
        while let (next, _, startWithoutWaiting) = takeNext() {
            switch startWithoutWaiting?(next, { [weak self] in self?.settled() }) {
            case true?:
                continue
            case false?:
                endOne()
            case nil:
                state.withLock { state in
                    state.running -= 1
                    if !state.stopped { state.held = next }
                }
                return false
            }
        }
        return true
    }

    /// One started URL is done with; the last of a run tells `onDrained`.
    private func endOne() {
        let onDrained: (@Sendable () -> Void)? = state.withLock { state in
            state.running -= 1
            guard state.running == 0 && state.queue.count == 0 && state.held == nil else { return nil }
            state.drained = true
            return state.onDrained
        }
        onDrained?()
    }

    /// Whether a run of probes ended since the last call: their requests,
    /// transfers and buffers are freed, and the heap has holes to return.
    func takeDrained() -> Bool {
        state.withLock { state in
            let was = state.drained
            state.drained = false
            return was
        }
    }
}
