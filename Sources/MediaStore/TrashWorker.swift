// Empties what CacheStore moved into trash/, on one serial Worker, so no
// reader waits on a large unlink and no thread per removal outlives the
// mount. It must not decide what is trash; it only empties the directory it
// was given.
import Foundation
import MediaSupport

package final class TrashWorker: Sendable {
    package let directory: String
    private let worker = Worker(name: "mediafs-trash")
    /// Whether a pass is queued and not yet begun: requests made before it
    /// begins coalesce into it, those made during it into one more. Held
    /// across `submit`, so a request either joins a queued pass or learns
    /// that the worker stopped.
    private let queued = Locked(false, rank: .trashQueued)
    /// Held for a whole pass, so two passes never race over the same names.
    private let passLock = NSLock()

    package init(directory: String) {
        self.directory = directory
    }

    /// Asks for trash to be emptied soon. The thread starts on the first
    /// request, not at init: a store made only to be read (`mediafs cache`)
    /// starts no thread. After `stop`, empties at once
    /// in the caller, so nothing is left behind and no thread is started.
    package func request() {
        let accepted = queued.withLock { queued -> Bool in
            if queued { return true }
            queued = worker.submit { [self] in
                self.queued.withLock { $0 = false }
                emptyNow()
            }
            return queued
        }
        if !accepted { emptyNow() }
    }

    /// Finishes every pass requested so far and joins the thread. Idempotent.
    package func stop() {
        worker.stop(drain: true)
    }

    /// Deletes what is in the directory now: entries removed earlier, also
    /// by a process that stopped before it was done.
    package func emptyNow() {
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
}
