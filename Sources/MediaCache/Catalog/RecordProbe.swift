// A probe of a listed entry that has no loader: a listing's background
// probe, or a stat that overtook it. Byte-frugal (HEAD, as a loader's
// listed probe), but its answer goes into the entry's record and unsaved
// metadata, not into a loader: `ls -l` of 100,000 listed files made a
// loader each (about 1 KiB, 100 MiB in all) only to turn it back into a
// record seconds later. Stats of the entry wait on it; the catalog holds
// it (`probing`) while it runs.
import Foundation

final class RecordProbe: @unchecked Sendable {
    private let answer = OneShot<Result<ContentInfo, MediaError>>()
    private let lock = NSLock()
    /// Guarded by `lock`.
    private var running: ContentProbe?
    private var promoted = false
    private var answeredAt = 0.0
    /// The catalog's clock, which `finishedAt` is on.
    private let clock: Clock

    init(clock: Clock) {
        self.clock = clock
    }
    /// Whether a stat handed its failure to the entry's loader already;
    /// touched only under the catalog's lock (in its state's closures).
    var failureHandedOver = false

    /// When it answered, on the monotonic clock (as a loader's backoff).
    var finishedAt: Double { lock.withLock { answeredAt } }

    /// The request is out; `promote` reaches it from now on.
    func started(_ probe: ContentProbe) {
        let promote = lock.withLock {
            running = probe
            return promoted
        }
        if promote { probe.promote() }
    }

    /// A stat waits on it: it jumps the background queue.
    func promote() {
        let probe = lock.withLock {
            promoted = true
            return running
        }
        if answer.value == nil { probe?.promote() }
    }

    func finish(_ result: Result<ContentInfo, MediaError>) {
        lock.withLock {
            answeredAt = clock.monotonic()
            running = nil
        }
        answer.fulfil(result)
    }

    /// The answer, or nil if none came by `deadline`.
    func wait(until deadline: Deadline) -> Result<ContentInfo, MediaError>? {
        answer.wait(until: deadline)
    }
}
