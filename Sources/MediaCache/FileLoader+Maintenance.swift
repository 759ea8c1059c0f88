// What is done to a FileLoader from outside the read path: status for
// xattrs, what the evictor needs to know, preload, and revalidation against
// the server. Freeing bytes is FileLoader+Freeing.swift.
import CSystem
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
        let due = info != nil && Self.now() - Double(lastValidated) >= maxAge
        lock.unlock()
        guard due else { return false }
        let done = NSCondition()
        nonisolated(unsafe) var answer: Result<ContentInfo, MediaError>?
        ContentProbe.start(url: source.url, fetcher: fetcher) { result in
            done.lock()
            answer = result
            done.broadcast()
            done.unlock()
        }
        done.lock()
        let deadline = Date(timeIntervalSinceNow: settings.timeout)
        while answer == nil && done.wait(until: deadline) {}
        let result = answer
        done.unlock()
        statistics.requests.add(1, ordering: .relaxed)
        switch result {
        case .success(let fresh):
            lock.lock()
            if let known = info, Self.sameVersion(known, fresh) {
                lastValidated = Int64(Self.now())
                dirty = true
                lock.unlock()
            } else {
                replaceContent(with: fresh, reason: "validators changed")
                lock.unlock()
                finishFreeing()
                return true
            }
        case .failure(let error):
            Log.debug("\(source.displayURL): cannot revalidate, serving the cache: \(error.message)")
        case nil:
            Log.debug("\(source.displayURL): revalidation timed out, serving the cache")
        }
        return false
    }

    /// Why an answer shows the remote file changed, or nil: another ETag,
    /// another length (of the whole body, or the total of a range), or,
    /// where neither side has an ETag, another Last-Modified.
    static func change(from info: ContentInfo, to head: ResponseHead) -> String? {
        if let etag = head.etag, let known = info.etag, etag != known {
            return "ETag \(known) became \(etag)"
        }
        let length = head.status == 206 ? head.contentRange?.total : head.status == 200 ? head.contentLength : nil
        if let length, length != info.length {
            return "length \(info.length) became \(length)"
        }
        if head.etag == nil, info.etag == nil, let modified = head.lastModified, let known = info.lastModified,
           modified != known {
            return "Last-Modified \(known) became \(modified)"
        }
        return nil
    }

    static func sameVersion(_ a: ContentInfo, _ b: ContentInfo) -> Bool {
        if a.length != b.length { return false }
        if let x = a.etag, let y = b.etag { return x == y }
        return a.lastModified == b.lastModified
    }

    /// The remote file changed: its cached bytes are dropped, reads in
    /// progress fail rather than mix two versions, and the kernel is told
    /// to forget its pages and size. Call with `lock` held; it only marks
    /// the bytes for freeing (it may run on the network thread), so a
    /// caller that may wait calls `finishFreeing()` after unlocking.
    func replaceContent(with fresh: ContentInfo, reason: String) {
        Log.warning("\(source.displayURL) changed on the server (\(reason)): dropping its cached bytes")
        stopAllTransfers()
        generation += 1
        info = fresh
        lastValidated = Int64(Self.now())
        lastError = nil
        markReset()
        changeHandler?()
    }

    /// Fetches the first `limit` bytes (nil: all) in the background at
    /// preload priority; `limit` 0 stops a preload.
    public func preload(limit: Int64?) throws {
        let info = try contentInfo()
        lock.lock()
        defer { lock.unlock() }
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
