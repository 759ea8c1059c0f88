// A read of the file: served from the data file where its bytes are present,
// waiting (bounded) for the transfers that bring the rest, and copying
// arriving bytes straight into the reader's buffer.
import Foundation
import MediaStore
import MediaSupport

extension FileLoader {
    // MARK: Reading

    /// Reads up to `buffer.count` bytes at `offset`: short at the end of the
    /// file, 0 past it. Waits for missing bytes, bounded by the timeout.
    /// The bytes count in `account` (another process reading the handle),
    /// else in the handle's own.
    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64, pattern: ReadPattern,
                     account: ReaderAccount? = nil) throws -> Int {
        // The bytes this read will wait on are a read's from now on, before
        // its lookup's probe brings them and while it waits for room.
        let (last, overflow) = offset.addingReportingOverflow(Int64(buffer.count))
        let coming = offset >= 0 && !overflow ? lock.withLock { $0.fetches.announce(offset..<last) } : nil
        defer { if let coming { lock.withLock { $0.fetches.arrived(coming) } } }
        prepareEntry()
        let info = try contentInfo()
        guard offset >= 0, offset < info.length else { return 0 }
        finishFreeing()
        let end = offset + min(Int64(buffer.count), info.length - offset)
        let wanted = offset..<end
        if let budget {
            // A read that must fetch lets the evictor free older bytes
            // first, so that its bytes are cached too.
            let missing = Int64(wanted.count) - lock.withLock { $0.bytes.present.overlapCount(with: wanted) }
            // A background job past its day's bytes fetches nothing: its
            // refusal (requestHoles) comes at once, not after a pass (it
            // once waited 2 s here, in the scan budget's room).
            let refused = pattern.readClass == .background && settings.backgroundDaily?.admits(missing) == false
            if missing > 0 && !refused {
                budget.awaitRoom(missing, until: Deadline.after(seconds: min(settings.timeout, Self.roomWait), clock: settings.clock),
                                 for: pattern.readClass)
            }
        }
        let target = UnsafeMutableRawBufferPointer(rebasing: buffer[..<Int(end - offset)])
        let grant = try waitUntilAvailable(wanted, into: target, info: info, pattern: pattern)
        defer { endRead(grant.token) }
        if grant.cachedAhead > 0, let file = grant.file {
            // A stream read from the cache: start the disk reading the cached
            // bytes ahead of it, so the next reads find them in the page
            // cache. Never holes: reading those would only make zero pages.
            _ = posix_fadvise(file.fd, off_t(end), off_t(grant.cachedAhead), POSIX_FADV_WILLNEED)
        }
        for part in grant.delivered.missing(in: wanted) {
            guard let file = grant.file else {
                throw MediaError.io("the cache of \(source.displayURL) has no data file")
            }
            try readPresent(from: file, into: target, at: Int(part.lowerBound - offset), range: part)
            statistics.bytesFromCache.add(Int64(part.count), ordering: .relaxed)
        }
        statistics.countServed(Int64(target.count), byClass: pattern.readClass.rawValue)
        (account ?? pattern.account)?.countRead(Int64(target.count))
        return target.count
    }

    /// What a read may do once its bytes are available: the ranges already
    /// in its buffer, the data file to pread the rest from (held, so it
    /// stays open), and its token in `reading` (nil: nothing to pread).
    struct ReadGrant {
        var delivered: ByteRangeSet
        var cachedAhead: Int64
        var file: DataFile?
        var token: Int?
    }

    /// Ends a read's claim on the bytes it preads; a freeing may wait on it.
    func endRead(_ token: Int?) {
        guard let token else { return }
        let freeing = lock.withLock { state in
            state.bytes.endReading(token: token)
            return state.bytes.isFreeingAnything
        }
        if freeing { lock.broadcast() }
    }

    /// Counts a read in `reading` until its preads are done.
    func beginRead(_ range: Range<Int64>, delivered: ByteRangeSet, cachedAhead: Int64,
                   in state: inout LoaderState) -> ReadGrant {
        if delivered.contains(range) { return ReadGrant(delivered: delivered, cachedAhead: 0, file: nil, token: nil) }
        let token = state.fetches.takeNumber()
        state.bytes.beginReading(range, token: token)
        return ReadGrant(delivered: delivered, cachedAhead: cachedAhead, file: openDataFile(&state), token: token)
    }

    /// Returns once every byte of `wanted` is either copied into `buffer`
    /// (the ranges returned) or present in the cache; the read is then
    /// counted in `reading` until its preads are done.
    func waitUntilAvailable(_ wanted: Range<Int64>, into buffer: UnsafeMutableRawBufferPointer,
                            info: ContentInfo, pattern: ReadPattern) throws -> ReadGrant {
        let deadline = deadline(after: settings.timeout)
        let owner = ObjectIdentifier(pattern)
        return try lock.withScope { scope in
            let startGeneration = scope.state.version.generation
            if let opened = pattern.generation, opened != startGeneration {
                throw MediaError.io("\(source.displayURL) changed on the server since it was opened; open it again")
            }
            if let cached = beginCachedRead(wanted, info: info, pattern: pattern, in: &scope.state) { return cached }
            // A reader that looks sequential fetches at least a round trip's worth
            // of the link: less leaves it idle while the reader comes back for more.
            var (window, ahead) = partWindows(wanted, window: pattern.fetchWindow(
                bytesPerRoundTrip: settings.link?.bytesPerRoundTrip(to: source.url) ?? 0), pattern: pattern)
            // A first read at the start of a file whose lookup brought no
            // head asks for what a lookup asks of a plain file: a demuxer's
            // probe reads a few hundred KiB from the start, in windows that
            // would each cost a round trip. An archive member's (its size
            // came from the index), a scan's or a player's alike: the plain
            // file beside it gets those bytes at its lookup whichever reads
            // it (decision 0016). A listed file's (its size came from the
            // listing), a player's: a listed film's player met four round
            // trips, 64, 96, 128 and 128 KiB (decision 0058); a scan of a
            // listed library, and a background job, get what they read.
            var holesOwner = owner
            let archiveMember = context.segmented?.isArchiveMember(source.url) == true
            let asksHead = wanted.lowerBound == 0 && scope.state.bytes.present.isEmpty
                && (archiveMember || (pattern.readClass == .play && scope.state.fetches.transfers.isEmpty
                                      && context.segmented?.serves(source.url) != true))
            if asksHead {
                window = max(window, min(settings.probeFirstBytes, info.length) - wanted.lowerBound)
                // The file's, not the handle's, as a plain file's lookup
                // probe is: it runs to its end whatever the reader does
                // next. A demuxer's seek to an mp4's moov stopped it at 64
                // KiB, and the reads after the moov asked for the rest again.
                holesOwner = ObjectIdentifier(self)
            }
            // A scan's read at an MP4's first sample, after its moov: the
            // demuxer's stream analysis reads on through the samples from
            // here, so the long transfer starts with this read, not with the
            // one after it, a round trip sooner (decision 0015).
            var streams = pattern.streams
            if !streams, !pattern.readClass.plays, !pattern.readsAhead,
               let first = scope.state.lookahead.firstSample, first <= wanted.lowerBound,
               wanted.lowerBound < first + Self.page {
                streams = true
                window = max(window, Int64(wanted.count))
            }
            var attempts = Attempts(stops: scope.state.fetches.stops)
            let wait = scope.state.fetches.addWait(wanted, buffer: buffer)
            defer { scope.state.fetches.removeWait(wait) }
            if !scope.state.passing.isEmpty {
                for range in scope.state.passing.take(wanted, into: buffer) { scope.state.fetches.filled(wait, range) }
            }
            var available = scope.state.availability(of: wait)
            let piece = pattern.scanPiece
            try requestHoles(in: available.missing(in: wanted), window: window, owner: holesOwner,
                             readClass: pattern.readClass, streams: streams, piece: piece,
                             account: scope.state.handles.accounts[owner], info: info,
                             attempts: &attempts, state: &scope.state)
            readAhead(from: wanted.upperBound, window: ahead, owner: owner, readClass: pattern.readClass,
                      streams: streams, info: info,
                      in: &scope.state)
            startStreamAhead(after: wanted, waited: true, pattern: pattern, info: info, in: &scope.state)
            // The link unknown yet (the file's first answer tells it): the
            // head's answer starts the stream, a round trip before the
            // reads after the demuxer's detour to its index would.
            if asksHead, pattern.readClass == .play, !pattern.startsElsewhere, settings.link?.isFar(to: source.url) == false,
               let head = scope.state.fetches.transfers.first(where: {
                   $0.value.owner == holesOwner && $0.value.start == 0 && $0.value.head == nil && !$0.value.cancelled
               }) {
                scope.state.fetches.streamOnAnswer(of: head.key, for: pattern, read: wanted)
            }
            // A wait that lasts says why, at debug level, after 1 s and each
            // time it doubles: which transfer it counts on and where that is
            // (a WAN seek once stalled 6 s with nothing in the log).
            let waitStarted = now()
            var reportAfter = Self.slowWaitReport
            while !available.contains(wanted) {
                let retryAt = scope.state.fetches.retryAt
                var wake = retryAt > now() ? deadline.earlier(Deadline(at: retryAt, clock: settings.clock)) : deadline
                let report = Deadline(at: waitStarted + reportAfter, clock: settings.clock)
                let reporting = report.at < wake.at
                if reporting { wake = report }
                let woken = scope.wait(until: wake)
                if !woken && reporting {
                    reportAfter *= 2
                    available = scope.state.availability(of: wait)
                    if !available.contains(wanted) {
                        Log.debug(slowWaitReason(for: wanted, missing: available.missing(in: wanted),
                                                 since: waitStarted, in: scope.state))
                    }
                    continue
                }
                if !woken && wake.at == deadline.at {
                    available = scope.state.availability(of: wait)
                    if available.contains(wanted) { break }
                    throw MediaError.io("\(source.displayURL): bytes \(wanted.lowerBound)-\(wanted.upperBound - 1) "
                                        + "did not arrive within \(Int(settings.timeout)) s")
                }
                if scope.state.version.generation != startGeneration {
                    throw MediaError.io("\(source.displayURL) changed on the server during the read")
                }
                available = scope.state.availability(of: wait)
                try requestHoles(in: available.missing(in: wanted), window: window, owner: holesOwner,
                                 readClass: pattern.readClass, streams: streams, piece: piece,
                                 account: scope.state.handles.accounts[owner], info: info,
                                 attempts: &attempts, state: &scope.state)
            }
            if scope.state.version.generation != startGeneration {
                throw MediaError.io("\(source.displayURL) changed on the server during the read")
            }
            return beginRead(wanted, delivered: scope.state.fetches.waits[wait]!.filled, cachedAhead: 0, in: &scope.state)
        }
    }

    /// After how long a read's wait says why it waits (then at each doubling).
    static let slowWaitReport = 1.0

    /// Why a read still waits: the transfers that cover its first missing
    /// byte (or none, and when a retry is due).
    func slowWaitReason(for wanted: Range<Int64>, missing: [Range<Int64>], since started: Double,
                        in state: LoaderState) -> String {
        let first = missing.first?.lowerBound ?? wanted.lowerBound
        let covering = state.fetches.transfers.filter { !$0.value.cancelled && $0.value.position <= first && first < $0.value.end }
        let why: String
        if covering.isEmpty {
            let retry = state.fetches.retryAt > now() ? String(format: "a retry due in %.1f s", state.fetches.retryAt - now()) : "none yet"
            why = "no transfer covers byte \(first) (\(retry))"
        } else {
            why = covering.map { id, transfer in
                let held = transfer.limit.map { $0 < transfer.end ? ", held at \($0)" : "" } ?? ""
                let answered = transfer.head == nil ? ", no answer yet" : ""
                return "transfer \(id) at byte \(transfer.position) of \(transfer.start)-\(transfer.end - 1)"
                    + " (\(transfer.priority)\(held)\(answered))"
            }.joined(separator: "; ")
        }
        let waited = String(format: "%.1f", now() - started)
        return "read \(wanted.lowerBound)-\(wanted.upperBound - 1) of \(source.displayURL) has waited \(waited) s: \(why)"
    }

    /// Records a read in the handle's pattern and the loader's; when every
    /// byte of it is cached, counts it in `reading` (nil: it must wait).
    private func beginCachedRead(_ wanted: Range<Int64>, info: ContentInfo, pattern: ReadPattern,
                                 in state: inout LoaderState) -> ReadGrant? {
        let owner = ObjectIdentifier(pattern)
        if !pattern.hasRead, pattern.readClass == .play, settings.handleGrace > 0 {
            if !state.handles.lingering.isEmpty { resumeLingering(pattern, at: wanted.lowerBound, in: &state) }
            if !pattern.hasRead { state.handles.addFresh(pattern, most: Self.maxLingering) }
        }
        let previousEnd = pattern.lastReadEnd
        if pattern.record(offset: wanted.lowerBound, end: wanted.upperBound) {
            cancelTransfers(of: owner, except: wanted.lowerBound, in: &state)
            if pattern.readClass == .play { stopStreamAhead(unlessBringing: wanted.lowerBound, in: &state) }
        }
        notePartStep(wanted, after: previousEnd, pattern: pattern, info: info, in: &state)
        state.accessed(at: wallNow())
        state.bytes.noteRead(at: wanted.lowerBound)
        if state.use.scanOnly && !pattern.readClass.plays { state.bytes.noteScanRead(wanted) }
        // A player's read makes the whole entry a player's.
        if pattern.readClass == .play { state.played() }
        guard state.bytes.present.contains(wanted) else { return nil }
        startStreamAhead(after: wanted, waited: false, pattern: pattern, info: info, in: &state)
        // Reading cached bytes sends no request: readahead starts from a
        // read that had to fetch, and goes on while this handle streams.
        let fetching = state.fetches.transfers.values.contains(where: { $0.owner == owner })
            || state.fetches.takeYielded(by: owner)
        if fetching {
            readAhead(from: wanted.upperBound, window: pattern.cachedReadWindow, owner: owner,
                      readClass: pattern.readClass, streams: pattern.streams, info: info, in: &state)
        }
        // Only a stream that is not fetching reads ahead from the disk.
        let streaming = pattern.window > 0 && !fetching
        let ahead = streaming
            ? min(state.bytes.present.presentEnd(from: wanted.upperBound), wanted.upperBound + Self.diskReadahead)
                - wanted.upperBound
            : 0
        return beginRead(wanted, delivered: ByteRangeSet(), cachedAhead: ahead, in: &state)
    }

    /// What one read has asked for: each byte is fetched at most
    /// `maxAttempts` times, however many holes the read spans.
    struct Attempts {
        var asked = ByteRangeSet()
        var retries = 0
        /// `stops` when these were asked: transfers the cache stopped
        /// itself (a purge, a change) say nothing of the server.
        var stops: Int
    }

    func readPresent(from file: DataFile, into buffer: UnsafeMutableRawBufferPointer, at start: Int,
                     range: Range<Int64>) throws {
        let target = UnsafeMutableRawBufferPointer(rebasing: buffer[start..<(start + Int(range.count))])
        let count: Int
        do {
            count = try FileIO.readFully(fd: file.fd, into: target, at: range.lowerBound)
        } catch let error as MediaError {
            throw MediaError(error.errno, "read from the cache of \(source.displayURL): \(error.message)")
        }
        if count < target.count {
            throw MediaError.io("cache data of \(source.displayURL) is shorter than its metadata")
        }
    }
}
