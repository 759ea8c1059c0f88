// A probe of a listed entry that has no loader: a listing's background
// probe, or a stat that overtook it. Byte-frugal (HEAD, as a loader's
// listed probe), but its answer goes into the entry's record and unsaved
// metadata, not into a loader: `ls -l` of 100,000 listed files made a
// loader each (about 1 KiB, 100 MiB in all) only to turn it back into a
// record seconds later. Stats of the entry wait on it; the catalog holds
// it (`probing`) while it runs.
import Foundation

final class RecordProbe: @unchecked Sendable {
    private let done = Condition()
    /// Guarded by `done`.
    private var outcome: Result<ContentInfo, MediaError>?
    private var running: ContentProbe?
    private var promoted = false
    /// When it answered, on the monotonic clock (as a loader's backoff).
    private(set) var finishedAt = 0.0
    /// Whether a stat handed its failure to the entry's loader already;
    /// guarded by the catalog's lock.
    var failureHandedOver = false

    /// The request is out; `promote` reaches it from now on.
    func started(_ probe: ContentProbe) {
        done.lock()
        running = probe
        let promote = promoted
        done.unlock()
        if promote { probe.promote() }
    }

    /// A stat waits on it: it jumps the background queue.
    func promote() {
        done.lock()
        promoted = true
        let probe = outcome == nil ? running : nil
        done.unlock()
        probe?.promote()
    }

    func finish(_ result: Result<ContentInfo, MediaError>) {
        done.lock()
        outcome = result
        finishedAt = Clock.system.monotonic()
        running = nil
        done.broadcast()
        done.unlock()
    }

    /// The answer, or nil if none came by `deadline`.
    func wait(until deadline: Deadline) -> Result<ContentInfo, MediaError>? {
        done.lock()
        defer { done.unlock() }
        while outcome == nil && done.wait(until: deadline) {}
        return outcome
    }
}
