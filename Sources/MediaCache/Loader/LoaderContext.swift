// What every loader of a mount shares: the cache, the network, the
// settings, the counters, the room under the limits and the table of open
// data files. Held once and referenced by each loader: 100,000 loaders each
// carrying their own copies spent about 150 bytes apiece on them.
import Foundation
import MediaNetwork
import MediaSegmented
import MediaStore
import MediaSupport

public final class LoaderContext: Sendable {
    let store: CacheStore
    let fetcher: Fetching
    let settings: LoaderSettings
    let statistics: Statistics
    /// Room under the cache limits; nil: unlimited.
    let budget: CacheBudget?
    /// The mount's table of open data files (a few hundred at most).
    let openFiles: OpenDataFiles
    /// The mount's segmented VODs: their size is their parts' lengths, so
    /// a lookup fetches none of their bytes. Asked here, not of each
    /// loader's Source: a loader made for a stat knows only its name and
    /// URL, and a listing may find a VOD after the loader was made.
    let segmented: SegmentedFetcher?

    package init(store: CacheStore, fetcher: Fetching, settings: LoaderSettings, statistics: Statistics? = nil,
                budget: CacheBudget? = nil, openFiles: OpenDataFiles = OpenDataFiles(),
                segmented: SegmentedFetcher? = nil) {
        self.store = store
        self.fetcher = fetcher
        self.settings = settings
        // Counted on the settings' clock unless the mount shares its own.
        self.statistics = statistics ?? Statistics(clock: settings.clock)
        self.budget = budget
        self.openFiles = openFiles
        self.segmented = segmented
    }
}
