// A probe of a listed entry that has no loader: a listing's background
// probe, or a stat that overtook it. Byte-frugal (HEAD, as a loader's
// listed probe), but its answer goes into the entry's record and unsaved
// metadata, not into a loader made only to turn back into a record seconds
// later (decision 0008). Stats of the entry wait on it; the catalog holds
// it (`probing`) while it runs.
import Foundation
import MediaSources
import MediaStore
import MediaSupport

final class RecordProbe: Sendable {
    private let answer = OneShot<Result<ContentInfo, MediaError>>()
    private struct State {
        var running: ContentProbe?
        var promoted = false
        var answeredAt = 0.0
        /// Whether a stat handed its failure to the entry's loader already
        /// (set and read under the catalog's lock too, in its state's closures).
        var failureHandedOver = false
    }
    private let state = Locked(State())
    /// The catalog's clock, which `finishedAt` is on.
    private let clock: Clock

    init(clock: Clock) {
        self.clock = clock
    }

    /// Whether a stat handed its failure to the entry's loader already.
    var failureHandedOver: Bool {
        get { state.withLock { $0.failureHandedOver } }
        set { state.withLock { $0.failureHandedOver = newValue } }
    }

    /// When it answered, on the monotonic clock (as a loader's backoff).
    var finishedAt: Double { state.withLock { $0.answeredAt } }

    /// The request is out; `promote` reaches it from now on.
    func started(_ probe: ContentProbe) {
        let promote = state.withLock { state in
            state.running = probe
            return state.promoted
        }
        if promote { probe.promote() }
    }

    /// A stat waits on it: it jumps the background queue.
    func promote() {
        let probe = state.withLock { state in
            state.promoted = true
            return state.running
        }
        if answer.value == nil { probe?.promote() }
    }

    func finish(_ result: Result<ContentInfo, MediaError>) {
        let now = clock.monotonic()
        state.withLock { state in
            state.answeredAt = now
            state.running = nil
        }
        answer.fulfil(result)
    }

    /// The answer, or nil if none came by `deadline`.
    func wait(until deadline: Deadline) -> Result<ContentInfo, MediaError>? {
        answer.wait(until: deadline)
    }
}
