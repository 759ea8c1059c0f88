// Freeing cached bytes: purge, eviction, trimming and a change on the
// server. Every freeing goes in this order, so that a byte claimed present,
// in memory or in the metadata on disk, is always in the data file:
//   1. mark: unclaim the bytes and mark them doomed (`trimming`, or a reset
//      for the whole file); from then on no write lands in them or claims
//      them (arriving bytes still reach waiting readers);
//   2. drain: wait for the reads and writes already using them;
//   3. persist: metadata without them, synced;
//   4. free: punch the holes, or empty the data file (a new one while the
//      kernel reads the old in place).
// Marking never blocks, so the network thread may mark (a change); steps 2–4
// run on a thread that may wait: the admin's, the evictor's, the next reader's.
import Foundation
#if canImport(Glibc)
import Glibc
#endif

extension FileLoader {
    /// Whether a freeing is marked and not yet done. Call with `lock` held.
    var isFreeingAnything: Bool { resetsAsked > resetsDone || !trimming.isEmpty }

    /// Whether bytes of `range` may be neither written nor claimed now.
    /// Call with `lock` held.
    func isFreeing(_ range: Range<Int64>) -> Bool {
        resetsAsked > resetsDone || trimming.overlaps(range)
    }

    /// Step 1 for the whole file: every byte unclaimed, the data file to be
    /// emptied. Call with `lock` held; never blocks.
    func markReset() {
        present = ByteRangeSet()
        resetsAsked += 1
        dirty = true
    }

    /// Drops every cached byte: stops the transfers, then frees the file.
    /// The next read fetches again.
    public func purge() {
        lock.lock()
        // Transfers a read waits on go on: their bytes reach the reader, and
        // are claimed only once written after the file was emptied.
        stopAllTransfers(exceptWaitedOn: true)
        lastError = nil
        markReset()
        lock.unlock()
        finishFreeing()
        Log.info("purged \(source.displayURL)")
    }

    /// Stops every transfer, for a file leaving the mount.
    public func stopTransfers() {
        lock.lock()
        stopAllTransfers()
        lock.unlock()
    }

    /// Call with `lock` held.
    func stopAllTransfers(exceptWaitedOn: Bool = false) {
        stops += 1
        for (id, transfer) in transfers where !transfer.cancelled {
            if exceptWaitedOn, waits.values.contains(where: { $0.range.overlaps(transfer.position..<transfer.end) }) {
                continue
            }
            transfers[id]!.cancelled = true
            fetcher.cancel(id)
        }
    }

    /// Evicts every cached byte unless the file is pinned, a transfer runs,
    /// a read waits or the kernel reads the file; returns whether it did.
    public func evict() -> Bool {
        lock.lock()
        // A pinned file's bytes are kept whatever the limits say; only a
        // purge (the user's own word) drops them.
        guard !pinned, transfers.isEmpty, waits.isEmpty, !kernelReading else { lock.unlock(); return false }
        guard !present.isEmpty else { lock.unlock(); return true }
        markReset()
        lock.unlock()
        finishFreeing()
        Log.info("evicted \(source.displayURL) from the cache")
        return true
    }

    /// Frees cached bytes until at most `target` bytes remain: first the
    /// bytes furthest behind the last read (played already), then those
    /// furthest ahead. Never the bytes a read waits on. For a file larger
    /// than the whole cache, which still plays, but is not all kept.
    public func trim(to target: Int64) {
        lock.lock()
        var excess = present.byteCount - target
        // Bytes the kernel reads in place stay until its handles close;
        // a pinned file's bytes stay, however far over the limit.
        guard excess > 0, hasEntry, !kernelReading, !pinned else { lock.unlock(); return }
        let behind = present.ranges.filter { $0.upperBound <= lastReadOffset }
        let ahead = Array(present.ranges.filter { $0.upperBound > lastReadOffset }.reversed())
        var doomed = ByteRangeSet()
        for range in behind + ahead where excess > 0 {
            if waits.values.contains(where: { $0.range.overlaps(range) }) { continue }
            let count = min(Int64(range.count), excess)
            // Behind the reader, drop from the oldest end; ahead, from the far end.
            let part = range.upperBound <= lastReadOffset
                ? range.lowerBound..<(range.lowerBound + count)
                : (range.upperBound - count)..<range.upperBound
            doomed.insert(part)
            excess -= count
        }
        for part in doomed.ranges {
            present.remove(part)
            trimming.insert(part)
        }
        if !doomed.isEmpty { dirty = true }
        lock.unlock()
        guard !doomed.isEmpty else { return }
        finishFreeing()
        Log.info("dropped \(doomed.byteCount) bytes of \(source.displayURL) to keep the cache within its limit")
    }

    /// Steps 2–4 for every freeing marked so far. Returns at once when none
    /// is. Call with no lock held, and never on the network thread.
    func finishFreeing() {
        lock.lock()
        let pending = isFreeingAnything
        lock.unlock()
        guard pending else { return }
        flushLock.withLock { savedClaims in finishFreeingHoldingFlushLock(&savedClaims) }
    }

    private func finishFreeingHoldingFlushLock(_ savedClaims: inout Bool) {
        lock.lock()
        while isFreeingAnything {
            let resetsTarget = resetsAsked
            let resetting = resetsTarget > resetsDone
            let doomed = trimming
            func inUse(_ range: Range<Int64>) -> Bool { resetting || doomed.overlaps(range) }
            while reading.values.contains(where: inUse) || writing.values.contains(where: inUse) {
                lock.wait()
            }
            let snapshot = metaSnapshot()
            // What is freed is in the data file as it is now, claimed or not.
            let file = openDataFile()
            let length = info?.length
            // A file the kernel reads in place is left to it whole.
            let replace = resetting && kernelReading
            if snapshot != nil { dirty = false }
            // No snapshot for an entry means its data file cannot be opened
            // now: the metadata cannot be rewritten, so nothing is freed.
            var persisted = snapshot != nil || !hasEntry || info == nil
            lock.unlock()

            if let snapshot {
                do {
                    try persist(snapshot, savedClaims: &savedClaims)
                } catch {
                    statistics.cacheWriteFailed(error as? MediaError ?? MediaError.io("\(error)"))
                    persisted = forgetMeta(&savedClaims)
                }
            }
            if !persisted {
                Log.error("\(source.displayURL): keeping bytes the cache metadata may still claim")
            } else if replace, let length {
                replaceDataFile(length: length)
            } else if let file {
                free(doomed: resetting ? nil : doomed, of: file, length: length)
            }

            lock.lock()
            if !persisted {
                // Left marked: nothing is written or claimed there until a
                // later freeing manages to persist.
                dirty = true
                break
            }
            if resetting { resetsDone = max(resetsDone, resetsTarget) }
            for range in doomed.ranges { trimming.remove(range) }
            lock.broadcast()
        }
        lock.unlock()
    }

    /// Step 4: punches `doomed`, or (nil) empties the whole data file while
    /// keeping its sparse length.
    private func free(doomed: ByteRangeSet?, of file: DataFile, length: Int64?) {
        do {
            if let doomed {
                for part in doomed.ranges {
                    do {
                        try FileIO.punchHole(fd: file.fd, range: part)
                    } catch {
                        Log.warning("freeing bytes of \(source.displayURL): \(error)")
                    }
                }
            } else if let length {
                try FileIO.truncate(fd: file.fd, to: 0)
                try FileIO.truncate(fd: file.fd, to: length)
            }
        } catch {
            Log.error("emptying the cache of \(source.displayURL): \(error)")
        }
    }

    /// When the metadata cannot be rewritten without the doomed bytes, the
    /// entry's metadata goes: a miss is safe, a stale claim is not. Returns
    /// whether no metadata claims anything any more.
    private func forgetMeta(_ savedClaims: inout Bool) -> Bool {
        do {
            try store.forgetMeta(forKey: key)
            savedClaims = false
            return true
        } catch {
            Log.error("\(source.displayURL): \(error)")
            return false
        }
    }
}
