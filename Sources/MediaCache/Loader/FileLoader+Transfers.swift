// The fetcher's side of a FileLoader: a transfer's head is checked once,
// its body lands in the data file and in waiting readers' buffers, its end
// is judged. Called on the fetcher's thread; takes the loader's lock only
// around bookkeeping, never around the pwrite.
import Foundation
#if canImport(Glibc)
import Glibc
#endif

extension FileLoader {
    // MARK: Transfers (called on the fetcher's thread)

    public func transfer(_ id: TransferID, receiveHead head: ResponseHead) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        return accept(head, of: id)
    }

    /// A lookup's ranged GET probe learned the info: it is taken as the
    /// probe's answer, and the transfer, still running, as one of the first
    /// `limit` bytes, which a first read joins instead of asking again.
    /// Its head time is the link's first round trip (with the connection's
    /// setup: the next transfer's lowers it), so the first reads past it
    /// are sized to the link, not to the read. Returns the delegate for its
    /// body; nil stops it.
    func adoptProbe(_ learned: ContentInfo, id: TransferID, head: ResponseHead, limit: Int64,
                    askedAt: Double) -> TransferDelegate? {
        lock.lock()
        defer { lock.broadcast(); lock.unlock() }
        take(learned)
        let end = min(limit, learned.length)
        let reserved = budget?.reserve(upTo: end) ?? 0
        transfers[id] = Transfer(end: end, position: 0, owner: ObjectIdentifier(self), priority: .read,
                                 reserved: reserved, askedAt: askedAt)
        statistics.requests.add(1, ordering: .relaxed)
        statistics.transfersInFlight.add(1, ordering: .relaxed)
        guard accept(head, of: id) else {
            transfers[id] = nil
            budget?.release(reserved)
            statistics.transfersInFlight.add(-1, ordering: .relaxed)
            return nil
        }
        // A server without ranges answers with the whole body: only the
        // first bytes are kept, as a HEAD would have fetched none.
        transfers[id]!.end = min(transfers[id]!.end, end)
        Log.debug("GET \(source.displayURL) bytes 0-\(end - 1) (with the probe)")
        return self
    }

    /// Checks a transfer's head against what is known of the file.
    /// Call with `lock` held.
    func accept(_ head: ResponseHead, of id: TransferID) -> Bool {
        guard var transfer = transfers[id], !transfer.cancelled, let info else { return false }
        let problem: MediaError?
        // Bytes of this version came in ranges: a 200 now is not a server
        // without ranges (that one is known by `acceptsRanges` false).
        let ranged = info.acceptsRanges && (sawPartial || !present.isEmpty)
        if let change = Self.change(from: info, to: head) ?? Self.wholeBodyChange(head, to: transfer, after: ranged) {
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
                sawPartial = true
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
            if let seconds = head.retryAfterSeconds {
                retryAt = now() + min(seconds, settings.timeout)
            }
            lastError = problem
            Log.error("\(source.displayURL): \(problem.message)")
            lock.broadcast()
            return false
        }
        let now = self.now()
        if let askedAt = transfer.askedAt { settings.link?.roundTrip(now - askedAt, to: source.url) }
        transfer.head = (now, transfer.position)
        transfers[id] = transfer
        return true
    }

    /// Why a 200 answered to a range request means another version, or
    /// nil. After 206s of this version (or with bytes of it cached), a
    /// 200 to If-Range is the server saying the validator no longer
    /// matches; one to a request without If-Range (the file has no
    /// validators) is ambiguous, and taken as a change too: taken for a
    /// server that ignores Range, the new body would be cached and handed
    /// out beside the old bytes. A server that really ignores Range then
    /// answers 200 again, with nothing of the old version left to mix.
    static func wholeBodyChange(_ head: ResponseHead, to transfer: Transfer, after partials: Bool) -> String? {
        guard head.status == 200, partials else { return nil }
        return transfer.ifRange ? "a 200 with the whole body answered a range request with If-Range"
            : "a 200 with the whole body answered a range request, after 206s"
    }

    public func transfer(_ id: TransferID, receiveBody bytes: UnsafeRawBufferPointer) -> Bool {
        lock.lock()
        guard let transfer = transfers[id], !transfer.cancelled else { lock.unlock(); return false }
        let position = transfer.position
        let count = Int(min(Int64(bytes.count), transfer.end - position))
        let chunk = position..<(position + Int64(count))
        // Bytes being freed are handed to readers but not written: the
        // freeing would erase them after this write, and a claim would lie.
        // So are bytes that do not fit under the cache limits.
        var file = isFreeing(chunk) ? nil : openDataFile()
        let version = dataVersion
        if file != nil, let budget {
            if transfer.reserved >= Int64(count) {
                transfers[id]!.reserved -= Int64(count)
                budget.consume(Int64(count))
            } else if budget.take(Int64(count) - transfer.reserved) {
                budget.consume(transfer.reserved)
                transfers[id]!.reserved = 0
            } else {
                file = nil
            }
        }
        if file != nil { writing[id] = chunk }
        lock.unlock()

        let cached = file.map { writeToCache(UnsafeRawBufferPointer(rebasing: bytes[..<count]), at: position, fd: $0.fd) }
            ?? false
        statistics.bytesFromNetwork.add(Int64(count), ordering: .relaxed)

        lock.lock()
        defer { lock.broadcast(); lock.unlock() }
        writing[id] = nil
        // A purge may have cancelled the transfer during the pwrite: its
        // bytes are then neither claimed nor handed out.
        guard let current = transfers[id], !current.cancelled else { return false }
        for (key, wait) in waits where wait.range.overlaps(chunk) {
            let overlap = wait.range.clamped(to: chunk)
            let from = bytes.baseAddress! + Int(overlap.lowerBound - position)
            (wait.buffer.baseAddress! + Int(overlap.lowerBound - wait.range.lowerBound))
                .copyMemory(from: from, byteCount: Int(overlap.count))
            waits[key]!.filled.insert(overlap)
        }
        transfers[id]!.position = chunk.upperBound
        // Claimed only if written into the data file that is still current
        // (not replaced meanwhile) and no freeing began meanwhile (it waited for this write and will
        // erase what it wrote).
        if cached, version == dataVersion, !isFreeing(chunk) {
            present.insert(chunk)
            dirty = true
        }
        // More bytes than the answer announced: a lying server; stop here.
        return count == bytes.count
    }

    /// Writes arriving bytes into the data file. When the cache's disk is
    /// full or failing, reads go on from the network alone (waiting readers
    /// get the bytes directly) and writes are retried a little later.
    func writeToCache(_ bytes: UnsafeRawBufferPointer, at position: Int64, fd: Int32) -> Bool {
        guard statistics.cacheWritable else { return false }
        do {
            try FileIO.writeFully(fd: fd, from: bytes, at: position)
            return true
        } catch let error as MediaError {
            statistics.cacheWriteFailed(MediaError(error.errno, "write to the cache of \(source.displayURL): \(error.message)"))
            return false
        } catch {
            return false
        }
    }

    public func transfer(_ id: TransferID, completeWith error: MediaError?) {
        lock.lock()
        defer { lock.broadcast(); lock.unlock() }
        guard let transfer = transfers.removeValue(forKey: id) else { return }
        statistics.transfersInFlight.add(-1, ordering: .relaxed)
        budget?.release(transfer.reserved)
        // Stopped by a seek, a close or a purge: says nothing of the server.
        if transfer.cancelled { return }
        if error == nil, let head = transfer.head {
            settings.link?.body(transfer.position - head.position, took: now() - head.at, from: source.url)
        }
        // Every byte asked for arrived (a body longer than asked was cut there).
        if transfer.position >= transfer.end {
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
        retryAt = max(retryAt, now() + backoff)
    }
}
