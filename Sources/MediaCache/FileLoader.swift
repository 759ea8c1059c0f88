// The cache-or-fetch manager of one remote file: which bytes are on disk,
// which transfers are filling the rest, and the readers waiting on them.
// Reads are served from the sparse data file; holes are fetched with Range
// requests whose bytes land in the file as they arrive and wake waiters.
//
// Lock: `lock` guards every var below it. Never held across a pread, a
// pwrite, an fsync or a wait for the network; it is taken after no other
// lock (the fetcher's own lock may be taken under it).
import CSystem
import Foundation
#if canImport(Glibc)
import Glibc
#endif

public struct LoaderSettings: Sendable {
    /// How long a read waits for missing bytes before EIO.
    public var timeout: Double = 30
    /// Transfers one read may start for its bytes before giving up
    /// (`--retries` + 1).
    public var maxAttempts = 4
    /// Wait before retrying after the first failure; doubles each time.
    public var firstBackoff = 0.25
    public var maxBackoff = 4.0
    /// After a read gave up on a failing server, later reads fail at once
    /// for this long.
    public var unavailableFor = 2.0
    /// A read joins a running transfer at most this far ahead of it,
    /// rather than starting its own.
    public var joinDistance: Int64 = 8 << 20
    /// After a failed content probe, lookups fail fast for this long.
    public var probeRetryAfter: Double = 5
    /// A transfer with less than this left is let finish after a seek:
    /// stopping it would cost about what finishing it does.
    public var cancelTolerance: Int64 = 256 << 10

    public init() {}
}

public final class FileLoader: TransferDelegate, @unchecked Sendable {
    struct Transfer {
        var end: Int64
        /// Next byte this transfer will write.
        var position: Int64
        /// The handle whose reads started it; its seek or close may stop it.
        var owner: ObjectIdentifier
        /// Asked to stop: no read should count on it any more.
        var cancelled = false
        var priority: FetchRequest.Priority
    }

    enum ProbeState {
        case idle, running
        case failed(MediaError, at: Double)
    }

    /// How far ahead of a stream read from the cache the disk is asked to read.
    static let diskReadahead: Int64 = 8 << 20

    public let source: Source
    private let store: CacheStore
    private let fetcher: Fetching
    private let settings: LoaderSettings
    private let statistics: Statistics
    /// The owner of preload transfers, as a handle owns its readahead.
    private let preloadOwner = ReadPattern()
    /// Serialises metadata saves so an older snapshot never lands last.
    private let flushLock = NSLock()

    private let lock = NSCondition()
    private var info: ContentInfo?
    private var probe = ProbeState.idle
    private var probeAttempts = 0
    private var fd: Int32 = -1
    private var present = ByteRangeSet()
    private var transfers: [TransferID: Transfer] = [:]
    /// A read waiting for bytes. Arriving bytes are copied straight into
    /// its buffer (one copy fewer than a pread from the cache, and the way
    /// reads are still served when the cache cannot be written).
    struct Wait {
        var range: Range<Int64>
        var buffer: UnsafeMutableRawBufferPointer
        var filled = ByteRangeSet()
    }

    /// Reads waiting for bytes, by wait number.
    private var waits: [Int: Wait] = [:]
    private var nextWait = 0
    private var lastAccess: Int64 = 0
    private var lastValidated: Int64 = 0
    private var dirty = false
    private var lastError: MediaError? {
        didSet { lastErrorAt = Self.now() }
    }
    private var lastErrorAt = 0.0
    /// When the next transfer may start: a failing server is retried with
    /// backoff, or when its Retry-After says.
    private var retryAt = 0.0
    private var failuresInARow = 0
    /// After a read gave up, reads fail at once until then, so the kernel's
    /// own retries of a failed read do not each wait through the backoff.
    private var unavailableUntil = 0.0
    /// Reads between "bytes present" and the end of their pread: a purge
    /// waits for them, so no reader sees bytes vanish under it.
    private var activeReads = 0
    /// Bumped when the remote content changes; a read that began before
    /// fails instead of mixing versions.
    private var generation = 0
    /// Where the last read started, so trimming drops played bytes first.
    private var lastReadOffset: Int64 = 0
    /// Called (with `lock` held) when the remote content changed.
    public var onChange: (@Sendable () -> Void)? {
        get { lock.lock(); defer { lock.unlock() }; return changeHandler }
        set { lock.lock(); changeHandler = newValue; lock.unlock() }
    }
    private var changeHandler: (@Sendable () -> Void)?

    public init(source: Source, store: CacheStore, fetcher: Fetching, settings: LoaderSettings,
                statistics: Statistics = Statistics()) {
        self.source = source
        self.store = store
        self.fetcher = fetcher
        self.settings = settings
        self.statistics = statistics
        guard let meta = store.loadMeta(forKey: source.url) else { return }
        do {
            fd = try store.openData(forKey: source.url, length: meta.info.length)
            info = meta.info
            present = meta.present
            lastAccess = meta.lastAccess
            lastValidated = meta.lastValidated
        } catch {
            Log.warning("cache entry for \(source.displayURL) unusable: \(error)")
        }
    }

    deinit {
        if fd >= 0 { close(fd) }
    }

    private var key: String { source.url }

    private static func now() -> Double {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
    }

    // MARK: Content information

    /// Starts learning the content info in the background unless it is known.
    public func prefetchInfo() {
        lock.lock()
        defer { lock.unlock() }
        if info == nil, case .idle = probe { startProbe() }
    }

    /// The content info, from the cache or the server; waits for a probe.
    public func contentInfo() throws -> ContentInfo {
        let deadline = Date(timeIntervalSinceNow: settings.timeout)
        lock.lock()
        defer { lock.unlock() }
        while true {
            if let info { return info }
            switch probe {
            case .running:
                if !lock.wait(until: deadline) {
                    throw MediaError.io("\(source.displayURL): no answer within \(Int(settings.timeout)) s")
                }
            case .failed(let error, let at) where Self.now() - at < settings.probeRetryAfter:
                throw error
            case .idle, .failed:
                startProbe()
            }
        }
    }

    /// Call with `lock` held.
    private func startProbe() {
        probe = .running
        ContentProbe.start(url: source.url, fetcher: fetcher) { [self] result in
            self.probeFinished(result)
        }
    }

    private func probeFinished(_ result: Result<ContentInfo, MediaError>) {
        lock.lock()
        defer { lock.broadcast(); lock.unlock() }
        switch result {
        case .success(let learned):
            do {
                if fd >= 0 { close(fd) }
                fd = try store.openData(forKey: key, length: learned.length)
                info = learned
                present = ByteRangeSet()
                lastValidated = Int64(Self.now())
                lastAccess = lastValidated
                dirty = true
                probe = .idle
                probeAttempts = 0
            } catch let error as MediaError {
                fd = -1
                Log.error("\(source.displayURL): cannot create its cache entry: \(error)")
                probe = .failed(error, at: Self.now())
            } catch {
                probe = .failed(MediaError.io("\(error)"), at: Self.now())
            }
        case .failure(let error) where error.errno == EIO && probeAttempts + 1 < settings.maxAttempts:
            // A transient failure (unreachable, 5xx): try again after a
            // backoff while lookups keep waiting, bounded by their timeout.
            Log.warning("\(source.displayURL): \(error.message); retrying")
            probeAttempts += 1
            let backoff = min(settings.firstBackoff * Double(1 << (probeAttempts - 1)), settings.maxBackoff)
            DispatchQueue.global().asyncAfter(deadline: .now() + backoff) { [self] in
                lock.lock()
                startProbe()
                lock.unlock()
            }
        case .failure(let error):
            Log.error("\(source.displayURL): \(error.message)")
            probe = .failed(error, at: Self.now())
            probeAttempts = 0
        }
    }

    // MARK: Reading

    /// Reads up to `buffer.count` bytes at `offset`: short at the end of the
    /// file, 0 past it. Waits for missing bytes, bounded by the timeout.
    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64, pattern: ReadPattern) throws -> Int {
        let info = try contentInfo()
        let end = min(offset + Int64(buffer.count), info.length)
        guard offset < end else { return 0 }
        let wanted = offset..<end
        let target = UnsafeMutableRawBufferPointer(rebasing: buffer[..<Int(end - offset)])
        let (delivered, cachedAhead) = try waitUntilAvailable(wanted, into: target, info: info, pattern: pattern)
        if cachedAhead > 0 {
            // A stream read from the cache: start the disk reading the cached
            // bytes ahead of it, so the next reads find them in the page
            // cache. Never holes: reading those would only make zero pages.
            _ = posix_fadvise(fd, off_t(end), off_t(cachedAhead), POSIX_FADV_WILLNEED)
        }
        defer {
            lock.lock()
            activeReads -= 1
            if activeReads == 0 { lock.broadcast() }
            lock.unlock()
        }
        for part in delivered.missing(in: wanted) {
            try readPresent(into: target, at: Int(part.lowerBound - offset), range: part)
            statistics.bytesFromCache.add(Int64(part.count), ordering: .relaxed)
        }
        return target.count
    }

    /// Returns once every byte of `wanted` is either copied into `buffer`
    /// (the ranges returned) or present in the cache; the read is then
    /// counted in `activeReads` until its preads are done.
    private func waitUntilAvailable(_ wanted: Range<Int64>, into buffer: UnsafeMutableRawBufferPointer,
                                    info: ContentInfo, pattern: ReadPattern) throws -> (ByteRangeSet, cachedAhead: Int64) {
        let deadline = Date(timeIntervalSinceNow: settings.timeout)
        let owner = ObjectIdentifier(pattern)
        lock.lock()
        defer { lock.unlock() }
        if let opened = pattern.generation, opened != generation {
            throw MediaError.io("\(source.displayURL) changed on the server since it was opened; open it again")
        }
        if pattern.record(offset: wanted.lowerBound, end: wanted.upperBound) {
            cancelTransfers(of: owner, except: wanted.lowerBound)
        }
        lastAccess = Int64(Self.now())
        lastReadOffset = wanted.lowerBound
        let startGeneration = generation
        var attempts = 0
        if present.contains(wanted) {
            // Reading cached bytes sends no request: readahead starts from a
            // read that had to fetch, and goes on while this handle streams.
            if transfers.values.contains(where: { $0.owner == owner }) {
                readAhead(from: wanted.upperBound, window: pattern.window, owner: owner, info: info)
            }
            activeReads += 1
            // Only a stream that is not fetching reads ahead from the disk.
            let streaming = pattern.window > 0 && !transfers.values.contains(where: { $0.owner == owner })
            let ahead = streaming ? min(present.presentEnd(from: wanted.upperBound), wanted.upperBound + Self.diskReadahead)
                - wanted.upperBound : 0
            return (ByteRangeSet(), ahead)
        }
        let wait = nextWait
        nextWait += 1
        waits[wait] = Wait(range: wanted, buffer: buffer)
        defer { waits[wait] = nil }
        var available = availability(of: wait)
        try requestHoles(in: available.missing(in: wanted), window: pattern.window, owner: owner,
                         info: info, attempts: &attempts)
        readAhead(from: wanted.upperBound, window: pattern.window, owner: owner, info: info)
        while !available.contains(wanted) {
            let wake = retryAt > Self.now() ? min(deadline, Date(timeIntervalSince1970: retryAt)) : deadline
            if !lock.wait(until: wake) && wake == deadline {
                available = availability(of: wait)
                if available.contains(wanted) { break }
                throw MediaError.io("\(source.displayURL): bytes \(wanted.lowerBound)-\(wanted.upperBound - 1) "
                                    + "did not arrive within \(Int(settings.timeout)) s")
            }
            if generation != startGeneration {
                throw MediaError.io("\(source.displayURL) changed on the server during the read")
            }
            available = availability(of: wait)
            try requestHoles(in: available.missing(in: wanted), window: pattern.window, owner: owner,
                             info: info, attempts: &attempts)
        }
        if generation != startGeneration {
            throw MediaError.io("\(source.displayURL) changed on the server during the read")
        }
        activeReads += 1
        return (waits[wait]!.filled, 0)
    }

    /// Bytes of a wait that are in its buffer or in the cache. Call with `lock` held.
    private func availability(of wait: Int) -> ByteRangeSet {
        var available = waits[wait]!.filled
        for range in present.ranges where range.overlaps(waits[wait]!.range) {
            available.insert(range.clamped(to: waits[wait]!.range))
        }
        return available
    }

    /// Makes sure a transfer is on its way for every byte of `holes`: joins
    /// running ones, starts the rest (reaching `window` further). Throws
    /// once a read has tried too often. Call with `lock` held.
    private func requestHoles(in holes: [Range<Int64>], window: Int64, owner: ObjectIdentifier,
                              info: ContentInfo, attempts: inout Int) throws {
        for hole in holes {
            var point = hole.lowerBound
            while point < hole.upperBound {
                if let (id, covering) = transfers.first(where: { covers($0.value, point) }) {
                    if covering.priority != .read {
                        transfers[id]!.priority = .read
                        fetcher.promote(id)
                    }
                    point = covering.end
                    continue
                }
                // A server without ranges sends the whole body to every
                // request: one stream at a time, which every reader joins.
                if !info.acceptsRanges, let (_, stream) = transfers.first(where: { !$0.value.cancelled }) {
                    point = max(hole.upperBound, min(stream.end, hole.upperBound))
                    continue
                }
                // A 404 or 403 is believed for a while, not forever.
                if let error = lastError, error.errno == ENOENT || error.errno == EACCES,
                   Self.now() - lastErrorAt < settings.probeRetryAfter {
                    throw MediaError(error.errno, "\(source.displayURL): \(error.message)")
                }
                if let error = lastError, Self.now() < unavailableUntil {
                    throw MediaError(error.errno, "\(source.displayURL): \(error.message)")
                }
                if Self.now() < retryAt { return }
                guard attempts < settings.maxAttempts else {
                    unavailableUntil = Self.now() + settings.unavailableFor
                    failuresInARow = 0
                    throw MediaError.io("\(source.displayURL): bytes \(point)-\(hole.upperBound - 1) unavailable: "
                                        + (lastError?.message ?? "transfer ended early"))
                }
                attempts += 1
                point = startTransfer(at: point, end: max(hole.upperBound, point + window), owner: owner, info: info)
            }
        }
    }

    /// Keeps at least half a window of bytes present or on their way past
    /// `offset`, topping up a whole window at a time so transfers stay large.
    /// Call with `lock` held.
    private func readAhead(from offset: Int64, window: Int64, owner: ObjectIdentifier, info: ContentInfo) {
        // Bytes read ahead while the cache cannot be written would be lost.
        guard window > 0, offset < info.length, statistics.cacheWritable, info.acceptsRanges else { return }
        var lead = offset
        while lead < info.length {
            let presentEnd = present.presentEnd(from: lead)
            if presentEnd > lead {
                lead = presentEnd
            } else if let covering = transfers.values.first(where: { !$0.cancelled && $0.position <= lead && lead < $0.end }) {
                lead = covering.end
            } else {
                break
            }
            if lead - offset >= window / 2 { return }
        }
        if lead < info.length {
            startTransfer(at: lead, end: lead + window, owner: owner, info: info, priority: .readahead)
        }
    }

    /// Whether a running transfer will soon write `point`. Call with `lock` held.
    private func covers(_ transfer: Transfer, _ point: Int64) -> Bool {
        !transfer.cancelled && transfer.position <= point && point < transfer.end
            && (point - transfer.position <= settings.joinDistance || info?.acceptsRanges == false)
    }

    /// Stops the transfers a handle started that no read waits on, unless
    /// `offset` will soon be reached by one or it is nearly done.
    /// Call with `lock` held.
    private func cancelTransfers(of owner: ObjectIdentifier, except offset: Int64?) {
        for (id, transfer) in transfers where transfer.owner == owner && !transfer.cancelled {
            if let offset, covers(transfer, offset) { continue }
            if transfer.end - transfer.position < settings.cancelTolerance { continue }
            if waits.values.contains(where: { $0.range.overlaps(transfer.position..<transfer.end) }) { continue }
            transfers[id]!.cancelled = true
            fetcher.cancel(id)
            Log.debug("stop GET \(source.displayURL) at byte \(transfer.position) (was to reach \(transfer.end))")
        }
    }

    /// A handle opened: its reads belong to the content version of now.
    public func attach(_ pattern: ReadPattern) {
        lock.lock()
        pattern.generation = generation
        lock.unlock()
    }

    /// A handle closed: what it alone asked for is no longer needed.
    public func release(_ pattern: ReadPattern) {
        lock.lock()
        defer { lock.unlock() }
        cancelTransfers(of: ObjectIdentifier(pattern), except: nil)
    }

    /// Starts a transfer at `start` reaching toward `end`, but never into
    /// present bytes or a running transfer. Returns where it stops.
    /// Call with `lock` held.
    @discardableResult
    private func startTransfer(at start: Int64, end wantedEnd: Int64, owner: ObjectIdentifier, info: ContentInfo,
                               priority: FetchRequest.Priority = .read) -> Int64 {
        var end = min(wantedEnd, info.length)
        if let next = present.nextPresent(atOrAfter: start) { end = min(end, next) }
        for transfer in transfers.values where !transfer.cancelled && transfer.position > start {
            end = min(end, transfer.position)
        }
        let validator = info.etag.flatMap { $0.hasPrefix("W/") ? nil : $0 } ?? info.lastModified
        let request = FetchRequest(url: source.url, range: start..<end, ifRange: validator, priority: priority)
        let id = fetcher.start(request, delegate: self)
        statistics.requests.add(1, ordering: .relaxed)
        statistics.transfersInFlight.add(1, ordering: .relaxed)
        transfers[id] = Transfer(end: end, position: start, owner: owner, priority: priority)
        Log.debug("GET \(source.displayURL) bytes \(start)-\(end - 1)")
        return end
    }

    private func readPresent(into buffer: UnsafeMutableRawBufferPointer, at start: Int, range: Range<Int64>) throws {
        var done = 0
        let count = Int(range.count)
        while done < count {
            let n = pread(fd, buffer.baseAddress! + start + done, count - done, off_t(range.lowerBound) + off_t(done))
            if n < 0 && errno == EINTR { continue }
            if n <= 0 {
                throw n < 0 ? MediaError.system("read from the cache of \(source.displayURL)")
                            : MediaError.io("cache data of \(source.displayURL) is shorter than its metadata")
            }
            done += n
        }
    }

    // MARK: Transfers (called on the fetcher's thread)

    public func transfer(_ id: TransferID, receiveHead head: ResponseHead) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        guard var transfer = transfers[id], !transfer.cancelled, let info else { return false }
        let problem: MediaError?
        if let change = Self.change(from: info, to: head) {
            if let fresh = ContentProbe.info(from: head) {
                replaceContent(with: fresh, reason: change)
                lock.broadcast()
                return false
            }
            problem = MediaError.io("content changed on the server (\(change))")
        } else if head.status == 206 {
            if let answer = head.contentRange, answer.total == nil || answer.total == info.length,
               answer.range.upperBound <= info.length {
                transfer.position = answer.range.lowerBound
                transfer.end = answer.range.upperBound
                problem = nil
            } else {
                problem = MediaError.io("bad Content-Range '\(head.headers["content-range"] ?? "")' for a file of \(info.length) bytes")
            }
        } else if head.status == 200 {
            if self.info?.acceptsRanges == true {
                Log.warning("\(source.displayURL): the server ignores Range and sends whole bodies; "
                            + "reads far into the file wait for the stream to reach them")
                self.info?.acceptsRanges = false
                dirty = true
            }
            transfer.position = 0
            transfer.end = info.length
            problem = nil
        } else {
            problem = ContentProbe.error(for: head)
        }
        if let problem {
            if let text = head.headers["retry-after"], let seconds = Double(text.trimmingSpaces) {
                retryAt = Self.now() + min(seconds, settings.timeout)
            }
            lastError = problem
            Log.error("\(source.displayURL): \(problem.message)")
            lock.broadcast()
            return false
        }
        transfers[id] = transfer
        return true
    }

    public func transfer(_ id: TransferID, receiveBody bytes: UnsafeRawBufferPointer) -> Bool {
        lock.lock()
        guard let transfer = transfers[id], !transfer.cancelled else { lock.unlock(); return false }
        let fd = self.fd
        lock.unlock()

        let position = transfer.position
        let count = Int(min(Int64(bytes.count), transfer.end - position))
        let chunk = position..<(position + Int64(count))
        let cached = writeToCache(UnsafeRawBufferPointer(rebasing: bytes[..<count]), at: position, fd: fd)
        statistics.bytesFromNetwork.add(Int64(count), ordering: .relaxed)

        lock.lock()
        defer { lock.broadcast(); lock.unlock() }
        // A purge may have cancelled the transfer during the pwrite: its
        // bytes may have landed before the purge emptied the file, so they
        // are neither claimed nor handed out.
        guard let current = transfers[id], !current.cancelled else { return false }
        for (key, wait) in waits where wait.range.overlaps(chunk) {
            let overlap = wait.range.clamped(to: chunk)
            let from = bytes.baseAddress! + Int(overlap.lowerBound - position)
            (wait.buffer.baseAddress! + Int(overlap.lowerBound - wait.range.lowerBound))
                .copyMemory(from: from, byteCount: Int(overlap.count))
            waits[key]!.filled.insert(overlap)
        }
        transfers[id]!.position = chunk.upperBound
        if cached {
            present.insert(chunk)
            dirty = true
        }
        // More bytes than the answer announced: a lying server; stop here.
        return count == bytes.count
    }

    /// Writes arriving bytes into the data file. When the cache's disk is
    /// full or failing, reads go on from the network alone (waiting readers
    /// get the bytes directly) and writes are retried a little later.
    private func writeToCache(_ bytes: UnsafeRawBufferPointer, at position: Int64, fd: Int32) -> Bool {
        guard statistics.cacheWritable else { return false }
        var written = 0
        while written < bytes.count {
            let n = pwrite(fd, bytes.baseAddress! + written, bytes.count - written, off_t(position) + off_t(written))
            if n < 0 && errno == EINTR { continue }
            if n <= 0 {
                statistics.cacheWriteFailed(MediaError.system("write to the cache of \(source.displayURL)"))
                return false
            }
            written += n
        }
        return true
    }

    public func transfer(_ id: TransferID, completeWith error: MediaError?) {
        lock.lock()
        defer { lock.broadcast(); lock.unlock() }
        guard let transfer = transfers.removeValue(forKey: id) else { return }
        statistics.transfersInFlight.add(-1, ordering: .relaxed)
        // Stopped by a seek, a close or a purge: says nothing of the server.
        if transfer.cancelled { return }
        if error == nil && transfer.position >= transfer.end {
            lastError = nil
            failuresInARow = 0
            retryAt = 0
            return
        }
        if let error, error.errno != ECANCELED {
            lastError = error
            Log.warning("\(source.displayURL): transfer stopped at byte \(transfer.position): \(error.message)")
        } else if error == nil {
            lastError = MediaError.io("server sent \(transfer.end - transfer.position) bytes fewer than announced")
            Log.warning("\(source.displayURL): \(lastError!.message)")
        }
        // Otherwise the cache stopped it over a bad answer, already logged.
        // The next try waits longer each time: 0.25 s, 0.5 s, 1 s...
        failuresInARow += 1
        let backoff = min(settings.firstBackoff * Double(1 << min(failuresInARow - 1, 16)), settings.maxBackoff)
        retryAt = max(retryAt, Self.now() + backoff)
    }

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
    private func stopAllTransfers() {
        for (id, transfer) in transfers where !transfer.cancelled {
            transfers[id]!.cancelled = true
            fetcher.cancel(id)
        }
    }

    /// Forgets every present byte, waits for preads in progress, then frees
    /// the data file's blocks (truncating to 0 frees them; the sparse length
    /// comes back). Call with `lock` held and the transfers stopped.
    private func dropAll(length: Int64?) {
        present = ByteRangeSet()
        lastError = nil
        dirty = true
        while activeReads > 0 { lock.wait() }
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
                     isBusy: !transfers.isEmpty || !waits.isEmpty)
    }

    /// Evicts every cached byte unless a transfer runs or a read waits;
    /// returns whether it did.
    public func evict() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        guard transfers.isEmpty, waits.isEmpty else { return false }
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
        guard excess > 0, fd >= 0 else { return }
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
    private func replaceContent(with fresh: ContentInfo, reason: String) {
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

    // MARK: Attributes and persistence

    /// Size and mtime for getattr; throws what the probe learned on failure.
    public func attributes() throws -> (size: Int64, mtime: Int) {
        let info = try contentInfo()
        return (info.length, info.lastModified.flatMap(HTTPDate.seconds) ?? 0)
    }

    /// Persists the metadata if it changed: data first (fdatasync), then the
    /// metadata, so it never claims bytes the data file does not hold.
    public func flush() {
        flushLock.lock()
        defer { flushLock.unlock() }
        lock.lock()
        guard dirty, let info, fd >= 0 else { lock.unlock(); return }
        let meta = EntryMeta(url: key, info: info, present: present,
                             lastAccess: lastAccess, lastValidated: lastValidated)
        let fd = self.fd
        dirty = false
        lock.unlock()
        do {
            if fdatasync(fd) != 0 { throw MediaError.system("fdatasync of the cache of \(key)") }
            try store.saveMeta(meta, forKey: key)
        } catch {
            Log.error("cannot save cache metadata of \(key): \(error)")
            lock.lock()
            dirty = true
            lock.unlock()
        }
    }
}
