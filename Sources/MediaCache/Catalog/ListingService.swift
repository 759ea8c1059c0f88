// What the catalog's listings run on: how they reach their sources, how
// long a listing is believed, the worker that refreshes them (one at a
// time, off the lookups' threads) and the one that saves them into the
// cache (drained at stop; a refresh is not), the arguments read at mount
// from their saved copies to read again, each source's last outcome, and
// whether archives are shown as folders. The refresh and discovery rules
// are Catalog+Listings, +ListedVODs, +ListedArchives and +ReadAgain.
final class ListingService: Sendable {
    /// What listings reach their sources with.
    let context: ListingContext
    /// How long a listing is believed before it is fetched again.
    let dirCacheTime: Double
    /// Refreshes of listings, off the lookups' threads: one at a time.
    let refreshes = Worker(name: "mediafs-listings")
    /// Saves of listings into the cache, drained at stop (a refresh is not).
    let saves = Worker(name: "mediafs-listing-saves")
    /// The arguments read at mount from their saved copies, to read again
    /// from the network (Catalog+ReadAgain.swift).
    let readAgain: Locked<ReadAgain>
    /// Each listed or read-again source's last outcome, by origin.
    let health = Locked<[String: SourceHealth]>([:])
    /// Whether a listing's archives are shown as folders of their members
    /// (`--archives`, on unless turned off).
    let archives: Bool

    init(context: ListingContext, dirCacheTime: Double, readAgain: [any Listing], archives: Bool) {
        self.context = context
        self.dirCacheTime = dirCacheTime
        self.readAgain = Locked(ReadAgain(listings: readAgain))
        self.archives = archives
    }

    /// A refresh under way finishes (its fetch is bounded by the timeout);
    /// the saves queued are written.
    func stop() {
        refreshes.stop(drain: false)
        saves.stop(drain: true)
    }
}
