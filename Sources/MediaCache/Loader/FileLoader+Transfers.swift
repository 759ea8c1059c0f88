// The fetcher's side of a FileLoader: a transfer's head is checked once,
// its body lands in the data file and in waiting readers' buffers, its end
// is judged. Called on the fetcher's thread; takes the loader's lock only
// around bookkeeping, never around the pwrite.
import Foundation
#if canImport(Glibc)
import Glibc
import MediaNetwork
import MediaSources
import MediaStore
import MediaSupport
#endif

extension FileLoader {
    // MARK: Transfers (called on the fetcher's thread)

    public func transfer(_ id: TransferID, receiveHead head: ResponseHead) -> Bool {
        let accepted = lock.withLock { accept(head, of: id, in: &$0) }
        // A refusal may have changed what waiters wait for (a change, an error).
        if !accepted { lock.broadcast() }
        return accepted
    }

    /// A lookup's ranged GET probe learned the info: it is taken as the
    /// probe's answer, and the transfer, still running, as one of the first
    /// `limit` bytes, which a first read joins instead of asking again.
    /// Its head time is the link's first round trip (with the connection's
    /// setup: the next transfer's lowers it), so the first reads past it
    /// are sized to the link, not to the read. Returns the delegate for its
    /// body; nil stops it.
    /// `openEnded`: it asked for the whole file, held at `limit` (a
    /// player's lookup, `streamsFromLookup`). Over a far link it stays a
    /// long transfer, the stream that player's reads let go on with no
    /// gap and no second connection's setup and slow start (decision
    /// 0061); near, it is cut there as any other: a request costs little.
    func adoptProbe(_ learned: ContentInfo, id: TransferID, head: ResponseHead, limit: Int64, openEnded: Bool = false,
                    askedAt: Double) -> TransferDelegate? {
        defer { lock.broadcast() }
        return lock.withLock { state in
            take(learned, in: &state)
            let end = min(limit, learned.length)
            // A lookup's first bytes are a scan's until a player reads them:
            // a library's stats must not push out what players fetched.
            let readClass: ReadClass = state.use.scanOnly ? .scan : .play
            let reserved = budget?.reserve(upTo: end, for: readClass) ?? 0
            state.fetches.add(id, Transfer(end: end, position: 0, owner: ObjectIdentifier(self), priority: .read,
                                           reserved: reserved, askedAt: askedAt, readClass: readClass))
            countTransferStarted()
            guard accept(head, of: id, in: &state) else {
                _ = state.fetches.remove(id)
                budget?.release(reserved, for: readClass)
                statistics.transfersInFlight.add(-1, ordering: .relaxed)
                return nil
            }
            // Over a far link (this very answer told it), a file with more
            // than the head: the player's stream.
            if openEnded, end < learned.length, streamsAhead(learned) {
                // Owned as a stream ahead is (FileLoader+Lookahead): the
                // demuxer's detour to its index does not stop it, a read
                // past the head that waits on it makes it its handle's, and
                // the last close, or no open at all (`stopUnclaimedStream`),
                // stops it.
                state.fetches.hold(id, at: end)
                state.fetches.assign(id, to: lookaheadOwner, account: nil)
                statistics.probing.streamsAhead.add(1, ordering: .relaxed)
                Log.debug("GET \(source.displayURL) bytes 0- (with the probe, held at \(end): a player's lookup)")
                return self
            }
            // A server without ranges answers with the whole body: only the
            // first bytes are kept, as a HEAD would have fetched none.
            state.fetches.cut(id, at: end)
            // Held at the cut by the fetcher, it would never end: let go,
            // its first chunk past the cut stops it.
            if openEnded { fetcher.allow(id, through: Int64.max) }
            Log.debug("GET \(source.displayURL) bytes 0-\(end - 1) (with the probe)")
            return self
        }
    }

    /// Checks a transfer's head against what is known of the file; false
    /// refuses it (and the caller wakes the waiters).
    func accept(_ head: ResponseHead, of id: TransferID, in state: inout LoaderState) -> Bool {
        guard var transfer = state.fetches.transfers[id], !transfer.cancelled, var info = state.version.info else { return false }
        if (200..<300).contains(head.status), let answered = ChangeDetection.answered(head, known: info),
           let confirmed = confirming(info, by: answered, in: &state) {
            info = confirmed
        }
        let problem: MediaError?
        // Bytes of this version came in ranges: a 200 now is not a server
        // without ranges (that one is known by `acceptsRanges` false).
        let ranged = info.acceptsRanges && (state.version.sawPartial || !state.bytes.present.isEmpty)
        if let change = ChangeDetection.inHead(head, against: info)
            ?? ChangeDetection.wholeBody(head, askedWithIfRange: transfer.ifRange, after: ranged) {
            if let fresh = ContentProbe.info(from: head) {
                replaceContent(with: fresh, reason: change, in: &state)
                return false
            }
            problem = MediaError.io("content changed on the server (\(change))")
        } else if head.status == 206 {
            if let answer = head.contentRange, answer.total == nil || answer.total == info.length,
               answer.range.upperBound <= info.length {
                transfer.position = answer.range.lowerBound
                transfer.end = answer.range.upperBound
                // The fetcher counts a hold in body bytes from here: an
                // answer that begins earlier than asked is allowed the more.
                if let limit = transfer.limit, answer.range.lowerBound < transfer.start {
                    fetcher.allow(id, through: limit - answer.range.lowerBound)
                }
                transfer.start = answer.range.lowerBound
                state.version.tookPartial()
                problem = nil
            } else {
                problem = MediaError.io("bad Content-Range '\(head.headers["content-range"] ?? "")' for a file of \(info.length) bytes")
            }
        } else if head.status == 200 {
            if state.version.info?.acceptsRanges == true {
                Log.warning("\(source.displayURL): the server ignores Range and sends whole bodies; "
                            + "reads far into the file wait for the stream to reach them")
                state.ignoresRanges()
            }
            transfer.position = 0
            transfer.end = info.length
            // A whole body is not held: its reader waits further in.
            if transfer.limit != nil {
                transfer.limit = nil
                fetcher.allow(id, through: Int64.max)
            }
            problem = nil
        } else {
            problem = head.failure
        }
        if let problem {
            if let seconds = head.retryAfterSeconds(now: settings.clock.wall()) {
                state.fetches.retry(at: now() + min(seconds, settings.timeout))
            }
            state.fetches.setLastError(problem)
            Log.error("\(source.displayURL): \(problem.message)")
            return false
        }
        let now = self.now()
        switch head.roundTrip {
        case .arrival: if let askedAt = transfer.askedAt { settings.link?.roundTrip(now - askedAt, to: source.url) }
        case .measured(let seconds): settings.link?.roundTrip(seconds, to: source.url)
        case .unknown: break
        }
        transfer.head = (now, transfer.position)
        let streamOnAnswer = transfer.streamOnAnswer
        transfer.streamOnAnswer = nil
        state.fetches.replace(id, with: transfer)
        if let (pattern, read) = streamOnAnswer, state.handles.openHandles > 0 {
            startStreamAhead(after: read, waited: true, pattern: pattern, info: info, in: &state)
        }
        return true
    }

    public func transfer(_ id: TransferID, receiveBody bytes: UnsafeRawBufferPointer) -> Bool {
        // The network thread opens no file under the loader's lock.
        prepareDataFile()
        guard let (chunk, file, version) = lock.withLock({ reserveChunk(of: id, count: bytes.count, in: &$0) }) else {
            return false
        }
        let count = chunk.count
        let position = chunk.lowerBound
        let cached = file.map { writeToCache(UnsafeRawBufferPointer(rebasing: bytes[..<count]), at: position, fd: $0.fd) }
            ?? false
        statistics.bytesFromNetwork.add(Int64(count), ordering: .relaxed)

        defer { lock.broadcast() }
        return lock.withLock { state in
            state.bytes.endWriting(by: id)
            // A purge may have cancelled the transfer during the pwrite: its
            // bytes are then neither claimed nor handed out.
            guard let current = state.fetches.transfers[id], current.takesBytes else { return false }
            var taken = ByteRangeSet()
            for (key, wait) in state.fetches.waits where wait.range.overlaps(chunk) {
                let overlap = wait.range.clamped(to: chunk)
                let from = bytes.baseAddress! + Int(overlap.lowerBound - position)
                (wait.buffer.baseAddress! + Int(overlap.lowerBound - wait.range.lowerBound))
                    .copyMemory(from: from, byteCount: Int(overlap.count))
                state.fetches.filled(key, overlap)
                taken.insert(overlap)
            }
            // What no read took, when the cache keeps nothing (no room to
            // make, a failing disk), waits in memory for the next read. Not
            // when room is only short: a read that asks again overdraws,
            // and its bytes are cached.
            if !cached, !statistics.cacheWritable || budget?.passesThrough == true {
                state.passing.keep(UnsafeRawBufferPointer(rebasing: bytes[..<count]), at: position, except: taken)
            }
            state.fetches.advance(id, to: chunk.upperBound)
            // The rate as soon as the body can tell it, not at its end: a
            // reader that streams past a file's first fetch asks for its next
            // bytes while that fetch still runs, and only a measured link
            // sizes that ask (decision 0016).
            if current.limit == nil, !current.rateTold, let head = current.head,
               chunk.upperBound - head.position >= LinkEstimate.minRateSample {
                state.fetches.rateTold(id)
                settings.link?.body(chunk.upperBound - head.position, took: now() - head.at, from: source.url)
            }
            if let length = state.version.info?.length,
               state.lookahead.take(UnsafeRawBufferPointer(rebasing: bytes[..<count]), at: chunk, length: length) {
                startLookahead(in: &state)
            }
            if cached { _ = state.claim(written: chunk, intoDataVersion: version) }
            // More bytes than the answer announced: a lying server; stop here.
            return count == bytes.count
        }
    }

    /// Where a body chunk of `count` bytes goes: its range (cut at the
    /// transfer's end), the data file to write it into (nil: only to the
    /// readers) and that file's version; nil when the transfer is stopped.
    private func reserveChunk(of id: TransferID, count wanted: Int,
                              in state: inout LoaderState) -> (chunk: Range<Int64>, file: DataFile?, version: Int)? {
        guard let transfer = state.fetches.transfers[id], transfer.takesBytes else { return nil }
        let position = transfer.position
        let count = Int(min(Int64(wanted), transfer.end - position))
        let chunk = position..<(position + Int64(count))
        // Bytes being freed are handed to readers but not written: the
        // freeing would erase them after this write, and a claim would lie.
        // So are bytes that do not fit under the cache limits.
        var file = state.bytes.isFreeing(chunk) ? nil : openFiles.touch(ObjectIdentifier(self))
        let readClass = transfer.readClass
        statistics.countFetched(Int64(count), byClass: readClass.rawValue)
        transfer.account?.countFetched(Int64(count))
        if readClass == .background {
            settings.backgroundDaily?.charge(Int64(count), committed: state.fetches.useCommitted(Int64(count), of: id))
        }
        if file != nil, let budget {
            if transfer.reserved >= Int64(count) {
                state.fetches.useReserved(Int64(count), of: id)
                budget.consume(Int64(count), for: readClass)
            } else if budget.take(Int64(count) - transfer.reserved, for: readClass) {
                budget.consume(transfer.reserved, for: readClass)
                state.fetches.useReserved(nil, of: id)
            } else if state.fetches.isWaitedOn(chunk), budget.overdraw(Int64(count) - transfer.reserved, for: readClass) {
                // A read's own bytes are kept: the pass this wakes frees
                // older ones (the file read now is the newest).
                budget.consume(transfer.reserved, for: readClass)
                state.fetches.useReserved(nil, of: id)
            } else {
                file = nil
            }
        }
        if file != nil { state.bytes.beginWriting(chunk, by: id) }
        return (chunk, file, state.handles.dataVersion)
    }

    /// Writes arriving bytes into the data file. When the cache's disk is
    /// full or failing, reads go on from the network alone (waiting readers
    /// get the bytes directly) and writes are retried a little later.
    func writeToCache(_ bytes: UnsafeRawBufferPointer, at position: Int64, fd: Int32) -> Bool {
        guard statistics.cacheWritable else { return false }
        do {
            try FileIO.writeFully(fd: fd, from: bytes, at: position)
            return true
        } catch {
            let failure = error as? MediaError ?? MediaError.io("\(error)")
            statistics.cacheWriteFailed(MediaError(failure.errno, "write to the cache of \(source.displayURL): \(failure.message)"))
            return false
        }
    }

    public func transfer(_ id: TransferID, completeWith error: MediaError?) {
        defer { lock.broadcast() }
        lock.withLock { state in
            guard let transfer = state.fetches.remove(id) else { return }
            statistics.transfersInFlight.add(-1, ordering: .relaxed)
            budget?.release(transfer.reserved, for: transfer.readClass)
            settings.backgroundDaily?.uncommit(transfer.committed)
            // Stopped by a seek, a close or a purge: says nothing of the server.
            if transfer.cancelled { return }
            // A long transfer gave its connection up, or held too long: its
            // reader's next read asks again, with no backoff.
            if transfer.limit != nil, error?.errno == FetchError.yielded, transfer.position < transfer.end {
                state.fetches.yielded(by: transfer.owner)
                Log.debug("\(source.displayURL): held GET ended at byte \(transfer.position): \(error!.message)")
                return
            }
            // A held transfer's time is not the link's.
            if error == nil, transfer.limit == nil, let head = transfer.head {
                settings.link?.body(transfer.position - head.position, took: now() - head.at, from: source.url)
            }
            // Every byte asked for arrived (a body longer than asked was cut there).
            if transfer.position >= transfer.end {
                if state.fetches.succeeded() { Log.info("\(source.displayURL): its server answers again") }
                return
            }
            if let error, error.errno != ECANCELED {
                state.fetches.setLastError(error)
                let first = state.fetches.claimOutageLog()
                let message = "\(source.displayURL): transfer stopped at byte \(transfer.position): \(error.message)"
                if first {
                    Log.warning(message + " (further failures of this file are logged at debug level until it is read again)")
                } else {
                    Log.debug(message)
                }
            } else if error == nil {
                let problem = MediaError.io("server sent \(transfer.end - transfer.position) bytes fewer than announced")
                state.fetches.setLastError(problem)
                if state.fetches.claimOutageLog() {
                    Log.warning("\(source.displayURL): \(problem.message)")
                } else {
                    Log.debug("\(source.displayURL): \(problem.message)")
                }
            }
            // Otherwise the cache stopped it over a bad answer, already logged.
            // The next try waits longer each time: 0.25 s, 0.5 s, 1 s...
            state.fetches.failed(now: now(), backoff: backoff(afterFailures:))
        }
    }
}
