// The background probes of listed entries, a bounded number at a time. A
// listing of 100,000 files is followed by a stat of each, so every entry of
// unknown size is probed, but queueing them all at once held a request, a
// probe and a transfer per entry (tens of megabytes, left fragmented in the
// heap once they ended). Here they wait as a URL each, and the next
// starts when one settles. A stat that comes first probes its entry itself,
// and the feeder then finds it known (or its probe running) and skips it.
import Foundation

final class ProbeFeeder: @unchecked Sendable {
    /// Probes started and not settled; more than the fetcher's places for
    /// one origin, so its queue never runs dry between two rounds.
    static let outstanding = 64

    private let lock = NSLock()
    /// Guarded by `lock`.
    private var queue = FIFO<String>()
    /// Starts a URL's probe unless it is known or being probed; returns
    /// whether it did (then it calls the closure once the probe settled).
    private var start: (String, @escaping @Sendable () -> Void) -> Bool = { _, _ in false }
    /// The same without waiting for any lock: nil when it would have had to
    /// (the URL is then kept for the next `pump`).
    private var startWithoutWaiting: ((String, @escaping @Sendable () -> Void) -> Bool?)?
    /// A URL whose start without waiting found a lock taken; it goes first.
    private var held: String?
    /// Told when the last probe waiting or running settled.
    private var onDrained: () -> Void = {}
    private var running = 0
    private var stopped = false
    /// Every probe handed to it settled since `takeDrained` was last asked.
    private var drained = false
    private let limit: Int

    init(outstanding: Int = ProbeFeeder.outstanding) {
        limit = outstanding
    }

    /// What starts a probe, and what hears that none is left; set once,
    /// before the first `add`.
    func starting(with start: @escaping (String, @escaping @Sendable () -> Void) -> Bool,
                  withoutWaiting: ((String, @escaping @Sendable () -> Void) -> Bool?)? = nil,
                  whenDrained: @escaping () -> Void = {}) {
        lock.lock()
        self.start = start
        startWithoutWaiting = withoutWaiting
        onDrained = whenDrained
        lock.unlock()
    }

    /// Probes these URLs' content info in the background, in order, after
    /// those already waiting.
    func add(_ urls: [String]) {
        lock.lock()
        for url in urls { queue.append(url) }
        lock.unlock()
        pump()
    }

    /// No probe starts from now on; what waits is dropped.
    func stop() {
        lock.lock()
        stopped = true
        queue = FIFO()
        held = nil
        lock.unlock()
    }

    /// Waiting entries, for tests.
    var waiting: Int {
        lock.lock()
        defer { lock.unlock() }
        return queue.count + (held == nil ? 0 : 1)
    }

    /// Starts probes while fewer than the limit run, with `lock` released:
    /// a probe's completion calls `settled`.
    func pump() {
        while true {
            lock.lock()
            guard !stopped, running < limit, let next = popNext() else {
                lock.unlock()
                return
            }
            running += 1
            let start = self.start
            lock.unlock()
            if !start(next, { [weak self] in self?.settled() }) {
                // Known already, or a lookup's probe runs: nothing to wait
                // for; if it was the last, the run has ended all the same.
                endOne()
            }
        }
    }

    /// Guarded by `lock`.
    private func popNext() -> String? {
        if let next = held {
            held = nil
            return next
        }
        return queue.popFirst()
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
        guard let startWithoutWaiting = lock.withLock({ self.startWithoutWaiting }) else { return false }
        while true {
            lock.lock()
            guard !stopped, running < limit, let next = popNext() else {
                lock.unlock()
                return true
            }
            running += 1
            lock.unlock()
            switch startWithoutWaiting(next, { [weak self] in self?.settled() }) {
            case true?:
                continue
            case false?:
                endOne()
            case nil:
                lock.lock()
                running -= 1
                if !stopped { held = next }
                lock.unlock()
                return false
            }
        }
    }

    /// One started URL is done with; the last of a run tells `onDrained`.
    private func endOne() {
        lock.lock()
        running -= 1
        let nowDrained = running == 0 && queue.count == 0 && held == nil
        if nowDrained { drained = true }
        let onDrained = self.onDrained
        lock.unlock()
        if nowDrained { onDrained() }
    }

    /// Whether a run of probes ended since the last call: their requests,
    /// transfers and buffers are freed, and the heap has holes to return.
    func takeDrained() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        let was = drained
        drained = false
        return was
    }
}
