// The one thread that deletes what CacheStore moved into trash/, so no reader
// waits on a large unlink and no thread per removal outlives the mount. It
// must not decide what is trash; it only empties the directory it was given.
import Foundation
import MediaSupport

public final class TrashWorker: @unchecked Sendable {
    private struct State {
        /// Set by `request`, cleared when a pass begins: requests made during
        /// a pass coalesce into one more pass.
        var requested = false
        var started = false
        var stopping = false
        var finished = false
    }

    public let directory: String
    /// Guards `state`; the worker waits on it.
    private let condition = Condition()
    private var state = State()
    /// Held for a whole pass, so two passes never race over the same names.
    private let passLock = NSLock()

    public init(directory: String) {
        self.directory = directory
    }

    /// Asks for trash to be emptied soon. The thread starts on the first
    /// request, not at init: the store is made before fuse_daemonize forks,
    /// and a fork keeps only the calling thread. After `stop`, empties at once
    /// in the caller, so nothing is left behind and no thread is started.
    public func request() {
        condition.lock()
        if state.stopping {
            condition.unlock()
            emptyNow()
            return
        }
        state.requested = true
        if !state.started {
            state.started = true
            let thread = Thread { [self] in run() }
            thread.name = "mediafs-trash"
            thread.start()
        }
        condition.signal()
        condition.unlock()
    }

    /// Finishes every pass requested so far and joins the thread. Idempotent.
    public func stop() {
        condition.lock()
        state.stopping = true
        condition.broadcast()
        while state.started && !state.finished { condition.wait() }
        condition.unlock()
    }

    /// Deletes what is in the directory now: entries removed earlier, also
    /// by a process that stopped before it was done.
    public func emptyNow() {
        passLock.lock()
        defer { passLock.unlock() }
        let files = FileManager.default
        guard let names = try? files.contentsOfDirectory(atPath: directory) else { return }
        for name in names {
            do {
                try files.removeItem(atPath: "\(directory)/\(name)")
            } catch {
                // Gone already is as good as deleted.
                if files.fileExists(atPath: "\(directory)/\(name)") {
                    Log.warning("cannot delete \(directory)/\(name): \(error)")
                }
            }
        }
    }

    private func run() {
        condition.lock()
        while true {
            if state.requested {
                state.requested = false
                condition.unlock()
                emptyNow()
                condition.lock()
            } else if state.stopping {
                break
            } else {
                condition.wait()
            }
        }
        state.finished = true
        condition.broadcast()
        condition.unlock()
    }
}
