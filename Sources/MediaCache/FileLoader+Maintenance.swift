// What is done to a FileLoader from outside the read path: status for
// xattrs, purge, eviction and trimming for the cache limits, preload, and
// revalidation against the server. Each takes the loader's lock and waits
// for reads in progress before it frees bytes.
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
        return FileStatus(url: source.url, info: info, present: present, state: state)
    }

    /// Drops every cached byte: stops the transfers, waits for reads in
    /// progress, then empties the data file. The next read fetches again.
    public func purge() {
        lock.lock()
        defer { lock.unlock() }
        stopAllTransfers()
        dropAll(length: info?.length)
        Log.info("purged \(source.displayURL)")
    }

    /// Stops every transfer, for a file leaving the mount.
    public func stopTransfers() {
        lock.lock()
        stopAllTransfers()
        lock.unlock()
    }

    /// Call with `lock` held.
    func stopAllTransfers() {
        for (id, transfer) in transfers where !transfer.cancelled {
            transfers[id]!.cancelled = true
            fetcher.cancel(id)
        }
    }

    /// Forgets every present byte, waits for preads in progress, then frees
    /// the data file's blocks (truncating to 0 frees them; the sparse length
    /// comes back). Call with `lock` held and the transfers stopped.
    func dropAll(length: Int64?) {
        present = ByteRangeSet()
        lastError = nil
        dirty = true
        while activeReads > 0 { lock.wait() }
        if kernelReading, let length {
            return replaceDataFile(length: length)
        }
        if let length, fd >= 0, ftruncate(fd, 0) != 0 || ftruncate(fd, off_t(length)) != 0 {
            Log.error(MediaError.system("emptying the cache of \(source.displayURL)").message)
        }
    }

    /// What the evictor needs to know of this file.
    public struct Usage: Sendable {
        public var allocatedBytes: Int64
        public var lastAccess: Int64
        public var isComplete: Bool
        /// Transfers running or reads waiting: not to be evicted now.
        public var isBusy: Bool
    }

    public func usage() -> Usage {
        lock.lock()
        defer { lock.unlock() }
        var st = stat()
        let allocated = fd >= 0 && fstat(fd, &st) == 0 ? Int64(st.st_blocks) * 512 : 0
        return Usage(allocatedBytes: allocated, lastAccess: lastAccess,
                     isComplete: info.map { present.contains(0..<$0.length) } ?? false,
                     isBusy: !transfers.isEmpty || !waits.isEmpty || kernelReading)
    }

    /// Evicts every cached byte unless a transfer runs, a read waits or the
    /// kernel reads the file; returns whether it did.
    public func evict() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        guard transfers.isEmpty, waits.isEmpty, !kernelReading else { return false }
        guard !present.isEmpty else { return true }
        dropAll(length: info?.length)
        Log.info("evicted \(source.displayURL) from the cache")
        return true
    }

    /// Frees cached bytes until at most `target` bytes remain: first the
    /// bytes furthest behind the last read (played already), then those
    /// furthest ahead. Never the bytes a read waits on. For a file larger
    /// than the whole cache, which still plays, but is not all kept.
    public func trim(to target: Int64) {
        lock.lock()
        defer { lock.unlock() }
        var excess = present.byteCount - target
        // Bytes the kernel reads in place stay until its handles close.
        guard excess > 0, fd >= 0, !kernelReading else { return }
        let behind = present.ranges.filter { $0.upperBound <= lastReadOffset }
        let ahead = Array(present.ranges.filter { $0.upperBound > lastReadOffset }.reversed())
        var doomed: [Range<Int64>] = []
        for range in behind + ahead where excess > 0 {
            if waits.values.contains(where: { $0.range.overlaps(range) }) { continue }
            let count = min(Int64(range.count), excess)
            // Behind the reader, drop from the oldest end; ahead, from the far end.
            let part = range.upperBound <= lastReadOffset
                ? range.lowerBound..<(range.lowerBound + count)
                : (range.upperBound - count)..<range.upperBound
            doomed.append(part)
            excess -= count
        }
        guard !doomed.isEmpty else { return }
        for part in doomed { present.remove(part) }
        dirty = true
        while activeReads > 0 { lock.wait() }
        for part in doomed where mediafs_punch_hole(fd, part.lowerBound, Int64(part.count)) != 0 {
            Log.warning(MediaError.system("freeing bytes of \(source.displayURL)").message)
        }
        Log.info("dropped \(doomed.reduce(Int64(0)) { $0 + Int64($1.count) }) bytes of \(source.displayURL) to keep the cache within its limit")
    }

    // MARK: Revalidation

    /// Checks the stored validators against the server when the policy
    /// says they are due. A server that cannot be reached leaves the cache
    /// as it is (offline use); a changed file drops its cached bytes.
    public func revalidate(olderThan maxAge: Double) {
        lock.lock()
        let due = info != nil && Self.now() - Double(lastValidated) >= maxAge
        lock.unlock()
        guard due else { return }
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
            defer { lock.unlock() }
            if let known = info, Self.sameVersion(known, fresh) {
                lastValidated = Int64(Self.now())
                dirty = true
            } else {
                replaceContent(with: fresh, reason: "validators changed")
            }
        case .failure(let error):
            Log.debug("\(source.displayURL): cannot revalidate, serving the cache: \(error.message)")
        case nil:
            Log.debug("\(source.displayURL): revalidation timed out, serving the cache")
        }
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
    /// to forget its pages and size. Call with `lock` held.
    func replaceContent(with fresh: ContentInfo, reason: String) {
        Log.warning("\(source.displayURL) changed on the server (\(reason)): dropping its cached bytes")
        stopAllTransfers()
        generation += 1
        info = fresh
        lastValidated = Int64(Self.now())
        dropAll(length: fresh.length)
        changeHandler?()
    }

    /// Fetches the first `limit` bytes (nil: all) in the background at
    /// preload priority; `limit` 0 stops a preload.
    public func preload(limit: Int64?) throws {
        let info = try contentInfo()
        lock.lock()
        defer { lock.unlock() }
        let owner = ObjectIdentifier(preloadOwner)
        cancelTransfers(of: owner, except: nil)
        let end = min(limit ?? info.length, info.length)
        for hole in present.missing(in: 0..<end) {
            var point = hole.lowerBound
            while point < hole.upperBound {
                if let covering = transfers.values.first(where: { covers($0, point) }) {
                    point = covering.end
                } else {
                    point = startTransfer(at: point, end: hole.upperBound, owner: owner, info: info, priority: .preload)
                }
            }
        }
    }
}
