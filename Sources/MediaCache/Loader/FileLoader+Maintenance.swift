// What is done to a FileLoader from outside the read path: status for
// xattrs, what the evictor needs to know, preload, and revalidation against
// the server. Freeing bytes is FileLoader+Freeing.swift.
import Foundation
#if canImport(Glibc)
import Glibc
#endif

extension FileLoader {
    // MARK: Administration

    public func status() -> FileStatus {
        lock.withLock { state in
            let shown: FileStatus.State
            if !state.fetches.transfers.isEmpty {
                shown = .fetching
            } else if let error = state.fetches.lastError {
                shown = .error(error.message)
            } else if case .failed(let error, _) = state.version.probe {
                shown = .error(error.message)
            } else {
                shown = .idle
            }
            return FileStatus(url: source.url, info: state.version.info, present: state.bytes.present, state: shown,
                              pinned: state.use.pinned)
        }
    }

    /// What the evictor needs to know of this file.
    public func usage() -> FileUsage {
        let allocated = EntryRecord.allocatedBytes(forKey: key, in: store)
        return lock.withLock { state in
            FileUsage(allocatedBytes: state.bytes.hasEntry ? allocated : 0, cachedBytes: state.bytes.present.byteCount,
                      lastAccess: state.use.lastAccess,
                      isComplete: state.version.info.map { state.bytes.present.contains(0..<$0.length) } ?? false,
                      isBusy: !state.fetches.transfers.isEmpty || !state.fetches.waits.isEmpty
                          || state.handles.kernelReading,
                      isPinned: state.use.pinned, isScanOnly: state.use.scanOnly, isOpen: state.handles.openHandles > 0)
        }
    }

    // MARK: Revalidation

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
                if let change = Self.difference(from: known, etag: fresh.etag, lastModified: fresh.lastModified,
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
    /// another version than the one known (`listedDifference`), the file
    /// changes now, as a response showing it would change it, with no open
    /// needed to notice. Returns whether it changed.
    @discardableResult
    public func listingShows(_ listed: ContentInfo) -> Bool {
        let changed = lock.withLock { state in
            guard let known = state.version.info, let reason = Self.listedDifference(from: known, to: listed) else {
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

    /// A version known by its length alone (an nginx index gives no
    /// validator) takes the validators of the server's first answer of that
    /// length, and its type: with nothing of the file cached or answered
    /// yet, there is no older version to mix with, and counting the
    /// validators' arrival as a change would fail the very read that asked.
    /// Returns the version confirmed, or nil (then `difference` judges).
    func confirming(_ known: ContentInfo, by answered: ContentInfo, in state: inout LoaderState) -> ContentInfo? {
        guard known.etag == nil, known.lastModified == nil, answered.etag != nil || answered.lastModified != nil,
              answered.length == known.length, !state.version.sawPartial, state.bytes.present.isEmpty else { return nil }
        var confirmed = known
        confirmed.etag = answered.etag
        confirmed.lastModified = answered.lastModified
        confirmed.contentType = known.contentType ?? answered.contentType
        state.confirmVersion(confirmed)
        Log.debug("\(source.displayURL): its first answer names the version the listing gave by length")
        return confirmed
    }

    /// Why a listing's `listed` shows another version than `known`, or nil.
    /// Stricter than `difference`: a listing is a second view of the file,
    /// made by other code on the server, so what it lacks is not known to
    /// be gone. A change is another length; another ETag where both carry
    /// one (weak or strong alike: a listing may give the strong form of
    /// what a GET answered weakly); else, where both carry a date, another
    /// second (S3 lists milliseconds that Last-Modified drops).
    static func listedDifference(from known: ContentInfo, to listed: ContentInfo) -> String? {
        if listed.length != known.length {
            return "length \(known.length) became \(listed.length)"
        }
        if let old = known.etag.map(strongETag), let new = listed.etag.map(strongETag) {
            return old == new ? nil : "ETag \(old) became \(new)"
        }
        guard let old = known.lastModified, let new = listed.lastModified,
              let before = HTTPDate.seconds(old), let after = HTTPDate.seconds(new), before != after else { return nil }
        return "Last-Modified \(old) became \(new)"
    }

    /// An ETag without its weak prefix.
    static func strongETag(_ etag: String) -> String {
        etag.hasPrefix("W/") ? String(etag.dropFirst(2)) : etag
    }

    /// Why an answer's head shows the remote file changed, or nil (see
    /// `difference`); the length is the whole body's, or a range's total.
    /// Only a 2xx answer describes the file: an error page's validators
    /// (often none) are the page's.
    static func change(from info: ContentInfo, to head: ResponseHead) -> String? {
        guard (200..<300).contains(head.status) else { return nil }
        let length = head.status == 206 ? head.contentRange?.total : head.status == 200 ? head.contentLength : nil
        return difference(from: info, etag: head.etag, lastModified: head.lastModified, length: length)
    }

    /// Why validators seen now show another version than `known`, or nil.
    /// A change is another length; another ETag; an ETag that appeared or
    /// disappeared, unless both sides carry the same Last-Modified (a
    /// proxy that drops ETags: the same file); another Last-Modified where
    /// neither side has an ETag. A validator gone with nothing left to
    /// compare is taken as a change: dropping the cache costs a fetch, a
    /// mix of two versions costs the reader its file.
    static func difference(from known: ContentInfo, etag: String?, lastModified: String?, length: Int64?) -> String? {
        if let length, length != known.length {
            return "length \(known.length) became \(length)"
        }
        switch (known.etag, etag) {
        case let (old?, new?):
            return old == new ? nil : "ETag \(old) became \(new)"
        case (nil, nil):
            guard lastModified != known.lastModified else { return nil }
            return "Last-Modified \(known.lastModified ?? "none") became \(lastModified ?? "none")"
        case (let old, let new):
            if let lastModified, lastModified == known.lastModified { return nil }
            return "ETag \(old ?? "none") became \(new ?? "none"), Last-Modified \(known.lastModified ?? "none") "
                + "became \(lastModified ?? "none")"
        }
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

    /// Whether a read's failure is the first of this file's outage, to be
    /// logged (and marks it logged); false once one was since the last
    /// complete transfer.
    public func claimFailureLog() -> Bool {
        lock.withLock { state in
            state.fetches.claimOutageLog()
        }
    }

    /// The VOD it serves got the key it lacked: what its reads failed
    /// with, and their backoff, are forgotten, so the next read fetches.
    public func keyArrived() {
        lock.withLock { state in
            state.fetches.forgetFailures()
        }
    }

    /// Fetches the first `limit` bytes (nil: all) in the background at
    /// preload priority; `limit` 0 stops a preload.
    public func preload(limit: Int64?) throws {
        prepareEntry()
        _ = try contentInfo()
        lock.withLock { state in
            // The info of now, under the lock its transfers start under: one
            // read before it could name a version a change has replaced since.
            guard let info = state.version.info else { return }
            let owner = preloadOwner
            // Asked for by a user: a player's bytes.
            state.played()
            cancelTransfers(of: owner, except: nil, in: &state)
            let end = min(limit ?? info.length, info.length)
            for hole in state.bytes.present.missing(in: 0..<end) {
                var point = hole.lowerBound
                while point < hole.upperBound {
                    if let (id, covering) = state.fetches.transfers.first(where: { covers($0.value, point, in: state) }) {
                        if covering.limit != nil {
                            extendHold(id, to: hole.upperBound, mustReach: 0, in: &state)
                        }
                        // No room to let it go further: preloading would only
                        // fetch bytes to drop.
                        guard state.fetches.transfers[id]!.reach > point else { return }
                        point = state.fetches.transfers[id]!.reach
                    } else {
                        let start = point
                        point = startTransfer(at: point, end: hole.upperBound, owner: owner, info: info,
                                              priority: .preload, in: &state)
                        // No room under the cache limits: preloading would only fetch bytes to drop.
                        if point == start { return }
                    }
                }
            }
        }
    }
}
