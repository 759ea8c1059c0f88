// Whether a source's server answered its last listing (or, for a playlist
// read at mount from its saved copy, its last read again), and since when
// it has not: `mediafs status` says "unreachable since" from it, through the
// root's `user.mediafs.sources`. Kept by origin (credentials removed),
// since that is what a user knows a source by.
import Foundation

struct SourceHealth: Encodable, Equatable {
    var origin: String
    /// "reachable" or "unreachable".
    var state: String
    /// Wall-clock seconds: of the last answer when reachable, of the first
    /// failure of this outage when not.
    var since: Int64
    /// What the last failure said; empty when reachable.
    var error: String

    /// The health after a listing's outcome at `now`: an outage keeps its
    /// first failure's time however often it is tried again.
    func after(failure: String?, at now: Int64) -> SourceHealth {
        guard let failure else { return SourceHealth(origin: origin, state: "reachable", since: now, error: "") }
        return SourceHealth(origin: origin, state: "unreachable", since: state == "unreachable" ? since : now,
                            error: failure)
    }
}
