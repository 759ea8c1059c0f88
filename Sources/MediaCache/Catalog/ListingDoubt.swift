// When a listing that succeeded is not believed at once: a gateway, a debrid
// service or a server restarting answers 200 with nothing (or a fraction),
// and a media server that sees its library empty "cleans" it, losing every
// item's metadata (Plex's empty-trash after a mount looked empty). A
// listing that drops more than half of a directory's names, and more than a
// few, or all of them, keeps the old names until a second listing, at
// least `delay` later, says the same (decision 0047). The user's own
// refresh (`user.mediafs.refresh`) is believed at once. Pure: the
// directory's doubt is kept in CatalogState.
public struct ListingDoubt: Sendable, Equatable {
    /// Drops up to this many are believed, whatever the fraction: a
    /// directory of four that loses two is a person's delete.
    public static let few = 5
    public static let defaultDelay = 30.0

    /// How long a doubted listing waits for its second; 0 believes every
    /// listing (`--listing-doubt 0`).
    public var delay: Double

    public init(delay: Double = ListingDoubt.defaultDelay) {
        self.delay = delay
    }

    /// Whether a listing that kept `kept` of the `previous` names is doubted.
    public func doubts(previous: Int, kept: Int) -> Bool {
        guard delay > 0, previous > 0, kept < previous else { return false }
        if kept == 0 { return true }
        let dropped = previous - kept
        return dropped > Self.few && dropped > previous / 2
    }

    /// What a listing is to the directory whose names it would replace.
    public enum Verdict: Equatable {
        /// Believed: its names replace the old.
        case believed
        /// Not yet: the old names stay until `until` (monotonic), when a
        /// second listing may confirm it.
        case doubted(dropped: Int, previous: Int, until: Double)
        /// Doubted before, and said again after the delay: believed.
        case confirmed(dropped: Int, previous: Int)
    }

    /// The verdict on a listing that kept `kept` of `previous` names at
    /// `now`, for a directory doubted since `since` (nil: not doubted).
    public func verdict(previous: Int, kept: Int, since: Double?, now: Double) -> Verdict {
        guard doubts(previous: previous, kept: kept) else { return .believed }
        guard let since, now - since >= delay else {
            return .doubted(dropped: previous - kept, previous: previous, until: (since ?? now) + delay)
        }
        return .confirmed(dropped: previous - kept, previous: previous)
    }
}
