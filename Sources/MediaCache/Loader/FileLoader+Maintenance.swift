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
        lock.lock()
        defer { lock.unlock() }
        let state: FileStatus.State
        if !transfers.isEmpty {
            state = .fetching
        } else if let error = lastError {
            state = .error(error.message)
        } else if case .failed(let error, _) = probe {
            state = .error(error.message)
        } else {
            state = .idle
        }
        return FileStatus(url: source.url, info: info, present: present, state: state, pinned: pinned)
    }

    /// What the evictor needs to know of this file.
    public struct Usage: Sendable {
        public var allocatedBytes: Int64
        /// Seconds since the epoch, with their fraction.
        public var lastAccess: Double
        public var isComplete: Bool
        /// Transfers running or reads waiting: not to be evicted now.
        public var isBusy: Bool
        /// Never to be evicted or trimmed; counts against the limits all the same.
        public var isPinned: Bool
    }

    public func usage() -> Usage {
        let allocated = EntryRecord.allocatedBytes(forKey: key, in: store)
        lock.lock()
        defer { lock.unlock() }
        return Usage(allocatedBytes: hasEntry ? allocated : 0, lastAccess: lastAccess,
                     isComplete: info.map { present.contains(0..<$0.length) } ?? false,
                     isBusy: !transfers.isEmpty || !waits.isEmpty || kernelReading, isPinned: pinned)
    }

    // MARK: Revalidation

    /// Checks the stored validators against the server when the policy
    /// says they are due. A server that cannot be reached leaves the cache
    /// as it is (offline use); a changed file drops its cached bytes.
    /// Returns whether the file changed.
    @discardableResult
    public func revalidate(olderThan maxAge: Double) -> Bool {
        lock.lock()
        let due = info != nil && wallNow() - Double(lastValidated) >= maxAge
        lock.unlock()
        guard due else { return false }
        let done = Condition()
        nonisolated(unsafe) var answer: Result<ContentInfo, MediaError>?
        ContentProbe.start(url: source.url, fetcher: fetcher) { result in
            done.lock()
            answer = result
            done.broadcast()
            done.unlock()
        }
        done.lock()
        let deadline = deadline(after: settings.timeout)
        while answer == nil && done.wait(until: deadline) {}
        let result = answer
        done.unlock()
        statistics.requests.add(1, ordering: .relaxed)
        switch result {
        case .success(let fresh):
            lock.lock()
            guard let known = info else { lock.unlock(); return false }
            if let change = Self.difference(from: known, etag: fresh.etag, lastModified: fresh.lastModified,
                                            length: fresh.length) {
                replaceContent(with: fresh, reason: change)
                lock.unlock()
                finishFreeing()
                return true
            }
            lastValidated = Int64(wallNow())
            dirty = true
            lock.unlock()
        case .failure(let error):
            Log.debug("\(source.displayURL): cannot revalidate, serving the cache: \(error.message)")
        case nil:
            Log.debug("\(source.displayURL): revalidation timed out, serving the cache")
        }
        return false
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
    /// has, opens go without keep_cache). Call with `lock` held; it only
    /// marks the bytes for freeing (it may run on the network thread), so a
    /// caller that may wait calls `finishFreeing()` after unlocking.
    func replaceContent(with fresh: ContentInfo, reason: String) {
        Log.warning("\(source.displayURL) changed on the server (\(reason)): dropping its cached bytes")
        stopAllTransfers()
        generation += 1
        info = fresh
        sawPartial = false
        lastValidated = Int64(wallNow())
        lastError = nil
        markReset()
        if changeHandler?(generation) != true { kernelClean = generation }
    }

    /// Fetches the first `limit` bytes (nil: all) in the background at
    /// preload priority; `limit` 0 stops a preload.
    public func preload(limit: Int64?) throws {
        prepareEntry()
        _ = try contentInfo()
        lock.lock()
        defer { lock.unlock() }
        // The info of now, under the lock its transfers start under: one
        // read before it could name a version a change has replaced since.
        guard let info else { return }
        let owner = preloadOwner
        cancelTransfers(of: owner, except: nil)
        let end = min(limit ?? info.length, info.length)
        for hole in present.missing(in: 0..<end) {
            var point = hole.lowerBound
            while point < hole.upperBound {
                if let covering = transfers.values.first(where: { covers($0, point) }) {
                    point = covering.end
                } else {
                    let start = point
                    point = startTransfer(at: point, end: hole.upperBound, owner: owner, info: info, priority: .preload)
                    // No room under the cache limits: preloading would only fetch bytes to drop.
                    if point == start { return }
                }
            }
        }
    }
}
