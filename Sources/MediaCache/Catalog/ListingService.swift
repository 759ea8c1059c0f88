// The catalog's listed directories and what listings find. A directory is
// listed through its Listing on the first lookup, which waits; it is
// refreshed in the background on the refreshes worker once due or when the
// user asks, while lookups answer from the last listing. A failure keeps the
// last listing and is tried again after `listingRetry`. No lock is held
// while a listing is fetched. What a listing shows is saved (a remount
// answers from it), its VODs become their files (ListingService+VODs) and
// its archives folders of their members (ListingService+Archives);
// arguments read at mount from saved copies are read again from the network
// (ListingService+ReadAgain). Each source's last outcome is its health.
//
// Shares the catalog's `state` (the tree, loaders and records), under the
// catalog's lock rules: never held while fetching or calling a loader that
// may wait.
import CSystem
import Foundation
import MediaSegmented
import MediaSources
import MediaStore
import MediaSupport

final class ListingService: Sendable {
    /// A listing that failed to refresh is tried again after this long (or
    /// the directory cache time, when shorter); its old listing is served.
    static let listingRetry: Double = 30

    /// What listings reach their sources with.
    let context: ListingContext
    /// How long a listing is believed before it is fetched again.
    let dirCacheTime: Double
    /// When a listing that dropped most names waits for a second.
    let doubt: ListingDoubt
    /// Refreshes of listings, off the lookups' threads: one at a time.
    let refreshes = Worker(name: "mediafs-listings")
    /// Saves of listings into the cache, drained at stop (a refresh is not).
    let saves = Worker(name: "mediafs-listing-saves")
    /// The arguments read at mount from their saved copies, to read again
    /// from the network (ListingService+ReadAgain.swift).
    let readAgain: Locked<ReadAgain>
    /// Each listed or read-again source's last outcome, by origin.
    private let health = Locked<[String: SourceHealth]>([:])
    /// Whether a listing's archives are shown as folders of their members
    /// (`--archives`, on unless turned off).
    let archives: Bool
    /// The catalog's tree, loaders and records.
    let state: Locked<CatalogState>
    let store: CacheStore
    /// Registers the VODs and archive members listings find.
    let fetcher: SegmentedFetcher
    let settings: LoaderSettings
    /// Has the flusher save the answers a listing left (CatalogMaintenance).
    private let wakeFlusher: @Sendable () -> Void
    /// With `--poll-interval`: told the token of each believed listing.
    let poller: ChangePoller?
    /// Hears of each relisted directory's names added, removed or changed
    /// (`Catalog.start`), so the kernel drops what it holds of them.
    let teller = Locked<NameTeller?>(nil)

    init(context: ListingContext, dirCacheTime: Double, doubt: ListingDoubt = ListingDoubt(),
         readAgain: [any Listing], archives: Bool,
         state: Locked<CatalogState>, store: CacheStore, fetcher: SegmentedFetcher, settings: LoaderSettings,
         poller: ChangePoller? = nil, wakeFlusher: @escaping @Sendable () -> Void) {
        self.poller = poller
        self.context = context
        self.dirCacheTime = dirCacheTime
        self.doubt = doubt
        self.readAgain = Locked(ReadAgain(listings: readAgain))
        self.archives = archives
        self.state = state
        self.store = store
        self.fetcher = fetcher
        self.settings = settings
        self.wakeFlusher = wakeFlusher
    }

    /// A refresh under way finishes (its fetch is bounded by the timeout);
    /// the saves queued are written.
    func stop() {
        refreshes.stop(drain: false)
        saves.stop(drain: true)
    }

    // MARK: Listing

    /// Lists a directory never listed, waiting for it; has a listed one
    /// refreshed in the background when it is due, answering from the old
    /// listing meanwhile.
    func listIfDue(_ directory: CatalogState.Directory) throws {
        guard directory.listing != nil else { return }
        let now = settings.clock.monotonic()
        let (listed, due) = state.withLock { state in
            (state.isListed(directory), state.claimRefresh(of: directory, at: now))
        }
        if !listed {
            // A remount answers from the last listing, and has it refreshed.
            guard listSaved(directory) else { return try fetchListing(of: directory) }
            try listIfDue(directory)
        } else if due {
            let queued = refreshes.submit { [self] in
                try? fetchListing(of: directory)
                state.withLock { $0.refreshEnded(of: directory) }
            }
            if !queued { state.withLock { $0.refreshEnded(of: directory) } }
        }
    }

    /// Lists a directory and replaces its names. On failure the old listing
    /// stays, and is tried again after `listingRetry`; so it does when the
    /// listing drops most names (`doubt`), unless `believe` (the user asked).
    /// With a poller, the listing's token is kept with it; `seen`: what
    /// the poll that found it changed saw (its validators are kept too).
    func fetchListing(of directory: CatalogState.Directory, believe: Bool = false, seen: ChangeToken? = nil) throws {
        guard let listing = directory.listing else { return }
        let sources: [Source]
        var token: ChangeToken?
        do {
            if poller != nil, let polled = listing as? any ChangePolling {
                (sources, token) = try polled.listWithToken(in: context)
            } else {
                sources = try listing.list(in: context)
            }
        } catch {
            let failure = error as? MediaError ?? MediaError.io("\(error)")
            let retryAt = settings.clock.monotonic() + min(dirCacheTime, Self.listingRetry)
            let listed = state.withLock { state in
                state.listingFailed(of: directory, retryAt: retryAt)
                return state.isListed(directory)
            }
            Log.error("listing \(listing.origin): \(failure.message)" + (listed ? "; serving its last listing" : ""))
            noteHealth(of: listing.origin, failure: failure.message)
            throw failure
        }
        noteHealth(of: listing.origin, failure: nil)
        // What it lists is saved; its VODs are shown as their files.
        let (vods, changedVODs) = withVODs(sources, of: listing)
        let shown = withArchives(vods, of: listing)
        if !believe, !judged(shown, of: directory, origin: listing.origin) { return }
        guard let (result, unsaved) = relist(directory, with: shown, believedFor: dirCacheTime) else { return }
        poller?.note(directory, token: token?.adopting(validatorsOf: seen))
        let changes = settle(result)
        revalidateChanged(changedVODs)
        if listing.refreshes { save(sources, of: directory) }
        // What the listing said of its files waits to be saved.
        if unsaved >= CatalogMaintenance.saveBatch { wakeFlusher() }
        // The page's text, its parse and the metadata read for it leave
        // holes between what stays (3 MiB of a remount's listing of 100,000).
        if result.new >= CatalogMaintenance.trimAfterRetiring {
            mediafs_malloc_trim()
            // Again once the saved copy is written and let go (a listing of
            // 100,000 S3 objects and its copy held 30 MiB).
            if listing.refreshes { saves.submit { mediafs_malloc_trim() } }
        }
        Log.debug("listed \(listing.origin): \(shown.count) entries"
                  + (result.dropped.isEmpty ? "" : ", \(result.dropped.count) files gone")
                  + (changes == 0 ? "" : ", \(changes) files changed"))
    }

    /// Whether a listing of `shown` replaces the directory's names now
    /// (ListingDoubt); says so when it does not, and when a doubted one is
    /// confirmed.
    private func judged(_ shown: [Source], of directory: CatalogState.Directory, origin: String) -> Bool {
        let now = settings.clock.monotonic()
        let verdict = state.withLock { $0.judge(directory, listing: Set(shown.map(\.url)), by: doubt, at: now) }
        switch verdict {
        case .believed:
            return true
        case .doubted(let dropped, let previous, let until):
            Log.warning("listing \(origin) answered with \(previous - dropped) of its \(previous) names: not believed "
                        + "yet, its names stay until a listing \(Int((until - now).rounded(.up))) s on or later "
                        + "says the same (--listing-doubt; writing user.mediafs.refresh believes it now)")
            return false
        case .confirmed(let dropped, let previous):
            Log.info("listing \(origin) said again that \(dropped) of its \(previous) names are gone: believed")
            return true
        }
    }

    /// A poll found the directory changed (ChangePoller): it is listed
    /// again on the refreshes worker, as a due refresh is, doubt and all.
    func relistChanged(_ directory: CatalogState.Directory, seen: ChangeToken?) {
        refreshes.submit { [self] in try? fetchListing(of: directory, seen: seen) }
    }

    /// `user.mediafs.refresh` on a listed directory: lists it again now, on
    /// the refreshes worker (after any refresh already queued), and returns
    /// once it is done. Lookups meanwhile answer from the old listing; a
    /// failure keeps it and is thrown. `shown`: its path, for messages.
    func refresh(_ directory: CatalogState.Directory, shown: String) throws {
        guard directory.listing != nil else { throw MediaError(EINVAL, "\(shown) is not a listed directory") }
        let outcome = OneShot<Result<Void, MediaError>>()
        let queued = refreshes.submit { [self] in
            do {
                try fetchListing(of: directory, believe: true)
                outcome.fulfil(.success(()))
            } catch {
                outcome.fulfil(.failure(error as? MediaError ?? MediaError.io("\(error)")))
            }
        }
        guard queued else { throw MediaError(ESHUTDOWN, "the mount is stopping") }
        // The refresh ahead of it, then its own: each bounded by the timeout.
        switch outcome.wait(until: Deadline.after(seconds: 2 * settings.timeout + 1, clock: settings.clock)) {
        case .success?: Log.info("refreshed the listing of \(shown)")
        case .failure(let error)?: throw error
        case nil: throw MediaError(ETIMEDOUT, "the listing of \(shown) is still being fetched")
        }
    }

    /// What a relisting leaves to do off the lock, whatever asked for it
    /// (a lookup past the cache time, the user, a poll, the remote
    /// control, a remount's saved listing): the loaders of names that left
    /// are stopped; each file the listing may show changed compares and,
    /// if it did change, drops its bytes and has the kernel drop its pages
    /// (a change frees bytes); then the kernel hears of the names added,
    /// removed and changed, after those pages' job on the same worker.
    /// Returns how many files changed.
    private func settle(_ result: CatalogState.Listed) -> Int {
        FileLoader.settle(result.dropped)
        var names = result.names
        let changed = result.changed.filter { $0.loader.listingShows($0.listed) }.map(\.name)
        if !changed.isEmpty { names.changed = Array(Set(names.changed).union(changed)).sorted() }
        if !names.isEmpty { tell(names) }
        return changed.count
    }

    /// Queues the kernel's news of `names`, once the mount is serving.
    func tell(_ names: NameChanges) {
        teller.withLock { $0 }?.tell(names)
    }

    /// Returns once the news queued so far reached the kernel (bounded).
    func waitUntilTold() {
        teller.withLock { $0 }?.waitUntilTold()
    }

    /// Replaces a directory's names by `sources`, believed for
    /// `believedFor` seconds. The metadata of files new to the mount is
    /// read first, in parallel and without the lock (see
    /// CatalogState.newFiles). nil when `unlessListed` and a listing came
    /// meanwhile; else what relisting left to do, and how many answers
    /// wait to be saved.
    private func relist(_ directory: CatalogState.Directory, with sources: [Source], believedFor: Double,
                        unlessListed: Bool = false) -> (result: CatalogState.Listed, unsaved: Int)? {
        let (isNew, removals) = state.withLock { $0.newFiles(in: sources) }
        let read = CatalogState.loadRecords(zip(sources, isNew).compactMap { $1 ? $0.url : nil }, from: store)
        let now = settings.clock.monotonic()
        return state.withLock { state in
            if unlessListed && state.isListed(directory) { return nil }
            return (state.relist(directory, with: sources, isNew: isNew, read: read, readAt: removals, at: now,
                                 believedFor: believedFor), state.unsaved.count)
        }
    }

    /// Lists a directory from the listing saved in the cache, due for a
    /// refresh at once; false when none was saved. Its VODs are read from
    /// their saved playlists (one never saved is left out until that
    /// refresh reads it).
    private func listSaved(_ directory: CatalogState.Directory) -> Bool {
        guard let listing = directory.listing, listing.refreshes, let url = directory.url,
              let saved = store.loadListing(url: url) else { return false }
        let all = saved.entries.map { entry in
            Source(name: entry.name, url: entry.url,
                   kind: entry.isDirectory ? .directory(listing.subdirectory(at: entry.url)) : .file(entry.info))
        }
        // In the listing's order, each VOD where its playlist was, each
        // archive's folder where its first volume was.
        let sources = withArchives(all.flatMap { entry in
            !entry.isDirectory && Presentation.mayName(entry.url) ? savedVODs([entry]) : [entry]
        }, of: listing, fromSaved: true)
        // A listing fetched meanwhile is newer than the saved one.
        if let result = relist(directory, with: sources, believedFor: 0, unlessListed: true)?.result {
            _ = settle(result)
        }
        Log.debug("listed \(listing.origin) from its saved listing: \(sources.count) entries; refreshing it")
        return true
    }

    /// Keeps a listing in the cache, on the saves worker (a listing of
    /// 100,000 names is a 15 MB write).
    private func save(_ sources: [Source], of directory: CatalogState.Directory) {
        guard let url = directory.url else { return }
        let store = self.store
        saves.submit {
            let saved = SavedListing(url: url, entries: sources.map { source in
                SavedListing.Entry(name: source.name, url: source.url, isDirectory: source.isDirectory,
                                   info: source.listedInfo)
            })
            do {
                try store.saveListing(saved)
            } catch {
                Log.warning("\((error as? MediaError)?.message ?? "\(error)"); the next mount lists it again")
            }
        }
    }

    // MARK: Health

    /// Notes how a source's server answered (nil: it did).
    func noteHealth(of origin: String, failure: String?) {
        let now = Int64(settings.clock.wall())
        health.withLock { health in
            let known = health[origin] ?? SourceHealth(origin: origin, state: "reachable", since: now, error: "")
            health[origin] = known.after(failure: failure, at: now)
        }
    }

    /// Each listed or read-again source's health, in origin order.
    var sourceHealth: [SourceHealth] {
        health.withLock { $0.values.sorted { $0.origin < $1.origin } }
    }
}
