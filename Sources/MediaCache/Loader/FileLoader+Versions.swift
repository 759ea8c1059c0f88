// A change of the file on the server, acted on: revalidation against the
// server, a listing that shows another version, a version known by its
// length confirmed, and the cached bytes of an old version dropped. How a
// change is told is ChangeDetection's; decisions 0006, 0007, 0038.
import Foundation
import MediaSources
import MediaStore
import MediaSupport

extension FileLoader {
    /// Checks the stored validators against the server when the policy
    /// says they are due. A server that cannot be reached leaves the cache
    /// as it is (offline use); a changed file drops its cached bytes.
    /// Returns whether the file changed.
    @discardableResult
    public func revalidate(olderThan maxAge: Double) -> Bool {
        let due = lock.withLock { $0.version.info != nil && wallNow() - Double($0.version.lastValidated) >= maxAge }
        guard due else { return false }
        let answer = OneShot<Result<ContentInfo, MediaError>>()
        ContentProbe.start(url: source.url, fetcher: fetcher, clock: settings.clock) { answer.fulfil($0) }
        let result = answer.wait(until: deadline(after: settings.timeout))
        statistics.requests.add(1, ordering: .relaxed)
        switch result {
        case .success(let fresh):
            let changed = lock.withLock { state in
                guard var known = state.version.info else { return false }
                if let confirmed = confirming(known, by: fresh, in: &state) { known = confirmed }
                if let change = ChangeDetection.difference(from: known, etag: fresh.etag, lastModified: fresh.lastModified,
                                                length: fresh.length) {
                    replaceContent(with: fresh, reason: change, in: &state)
                    return true
                }
                state.validated(at: Int64(wallNow()))
                return false
            }
            if changed { finishFreeing() }
            return changed
        case .failure(let error):
            Log.debug("\(source.displayURL): cannot revalidate, serving the cache: \(error.message)")
        case nil:
            Log.debug("\(source.displayURL): revalidation timed out, serving the cache")
        }
        return false
    }

    /// A refreshed listing shows `listed` for this file: when that is
    /// another version than the one known (`ChangeDetection.listed`), the file
    /// changes now, as a response showing it would change it, with no open
    /// needed to notice. Returns whether it changed.
    @discardableResult
    public func listingShows(_ listed: ContentInfo) -> Bool {
        let changed = lock.withLock { state in
            guard let known = state.version.info, let reason = ChangeDetection.listed(listed, against: known) else {
                return false
            }
            // What a listing does not say of the new version is taken as the
            // old one's: a 206 will tell if it no longer holds.
            var fresh = listed
            fresh.contentType = listed.contentType ?? known.contentType
            fresh.acceptsRanges = known.acceptsRanges
            replaceContent(with: fresh, reason: "its listing shows \(reason)", in: &state)
            return true
        }
        if changed { finishFreeing() }
        return changed
    }

    /// A version known by its length alone confirmed by the server's first
    /// answer (`ChangeDetection.confirmation`): returns the version
    /// confirmed, or nil (then `ChangeDetection.difference` judges).
    func confirming(_ known: ContentInfo, by answered: ContentInfo, in state: inout LoaderState) -> ContentInfo? {
        guard let confirmed = ChangeDetection.confirmation(of: known, by: answered, sawPartial: state.version.sawPartial,
                                                           hasBytes: !state.bytes.present.isEmpty) else { return nil }
        state.confirmVersion(confirmed)
        Log.debug("\(source.displayURL): its first answer names the version the listing gave by length")
        return confirmed
    }

    /// The remote file changed: its cached bytes are dropped, reads in
    /// progress fail rather than mix two versions, and the kernel is told
    /// to forget its pages and size under every name of the file (until it
    /// has, opens go without keep_cache). It only marks the bytes for
    /// freeing (it may run on the network thread), so a caller that may
    /// wait calls `finishFreeing()` after letting go of the lock.
    func replaceContent(with fresh: ContentInfo, reason: String, in state: inout LoaderState) {
        Log.warning("\(source.displayURL) changed on the server (\(reason)): dropping its cached bytes")
        stopAllTransfers(&state)
        let generation = state.version.changed(to: fresh, validatedAt: Int64(wallNow()))
        state.fetches.setLastError(nil)
        state.markReset()
        if state.version.changeHandler?(generation) != true { state.handles.kernelIsClean(at: generation) }
    }
}
