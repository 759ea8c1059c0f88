// Arguments read at mount from their saved copies (a playlist, an MPD: see
// SavedPresentations) are read again from the network in the background,
// as a listing is refreshed: on the refreshes worker, from the flusher's
// first pass, and after `listingRetry` while their server stays down. A
// VOD whose parts changed is another version of its file, served whole
// from then on, as a listing's refresh does; a key fetched now makes a VOD
// read without it readable. The mount's names stay those read at mount.
import Foundation
import MediaSources
import MediaSupport

/// What is left to read again, and when to try next.
struct ReadAgain {
    var listings: [any Listing]
    /// Monotonic seconds; 0: at once.
    var dueAt: Double = 0
    var running = false
    /// Failed tries in a row, so an outage is logged once, not every 30 s.
    var failures = 0
}

extension ListingService {
    /// Has the arguments read from saved copies read again, when due.
    func readSavedAgainIfDue() {
        let now = settings.clock.monotonic()
        let listings = readAgain.withLock { pending -> [any Listing]? in
            guard !pending.listings.isEmpty, !pending.running, now >= pending.dueAt else { return nil }
            pending.running = true
            return pending.listings
        }
        guard let listings else { return }
        let queued = refreshes.submit { [self] in readEachAgain(listings) }
        if !queued { readAgain.withLock { $0.running = false } }
    }

    private func readEachAgain(_ listings: [any Listing]) {
        let saved = SavedPresentations(store: store)
        var left: [any Listing] = []
        var firstFailure: String?
        for listing in listings {
            do {
                let sources = try saved.live(context) { try listing.list(in: $0) } ?? []
                noteHealth(of: listing.origin, failure: nil)
                let changed = register(sources)
                revalidateChanged(changed)
                Log.info("\(listing.origin): read again: " + (changed.isEmpty ? "unchanged" : "\(changed.count) files changed"))
            } catch {
                left.append(listing)
                let message = (error as? MediaError)?.message ?? "\(error)"
                noteHealth(of: listing.origin, failure: message)
                firstFailure = firstFailure ?? "\(listing.origin): \(message)"
            }
        }
        let now = settings.clock.monotonic()
        let failures = readAgain.withLock { pending -> Int in
            pending.listings = left
            pending.running = false
            pending.failures = left.isEmpty ? 0 : pending.failures + 1
            pending.dueAt = now + min(dirCacheTime, Self.listingRetry)
            return pending.failures
        }
        if let firstFailure {
            let line = "server unreachable: serving the saved copy (\(firstFailure)); trying again every "
                + "\(Int(min(dirCacheTime, Self.listingRetry))) s"
            if failures == 1 { Log.warning(line) } else { Log.debug(line) }
        }
    }

    /// Has the mount's fetcher serve each VOD among `sources` as read now;
    /// returns the URLs of those whose parts changed.
    func register(_ sources: [Source]) -> [String] {
        var changed: [String] = []
        for vod in sources.compactMap(\.vod) {
            switch fetcher.register(vod) {
            case .replaced: changed.append(vod.url)
            case .keysArrived: keyArrived(for: vod.url)
            case .new, .unchanged: break
            }
        }
        return changed
    }

    /// A VOD read without its key now has it: its loader, if one is live,
    /// forgets the reads that failed for want of it.
    func keyArrived(for url: String) {
        Log.info("\(MediaError.redacted(url)): its key was fetched; its encrypted segments read again")
        state.withLock { $0.loaders[url] }?.keyArrived()
    }
}
