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
import MediaStore
import MediaSupport
#endif

// The evictor frees a mounted file's bytes through these (Limits).
extension FileLoader: EvictableFile {}

extension FileLoader {
    /// Drops every cached byte: stops the transfers, then frees the file.
    /// The next read fetches again.
    public func purge() {
        lock.withLock { state in
            // Transfers a read waits on go on: their bytes reach the reader, and
            // are claimed only once written after the file was emptied.
            stopAllTransfers(&state, exceptWaitedOn: true)
            state.fetches.setLastError(nil)
            state.markReset()
        }
        finishFreeing()
        Log.info("purged \(source.displayURL)")
    }

    /// Stops every transfer, for a file leaving the mount.
    public func stopTransfers() {
        lock.withLock { stopAllTransfers(&$0) }
    }

    /// Loaders that left the mount (a relisting dropped them, a name was
    /// removed): what they fetch stops and their metadata is saved. Call
    /// without the catalog's lock.
    static func settle(_ dropped: [FileLoader]) {
        for loader in dropped {
            loader.stopTransfers()
            loader.flush()
        }
    }

    func stopAllTransfers(_ state: inout LoaderState, exceptWaitedOn: Bool = false) {
        state.fetches.countStop()
        state.passing.clear()
        for (id, transfer) in state.fetches.transfers where transfer.takesBytes {
            // One its reader stopped is asked once; from here on it keeps nothing.
            if transfer.cancelled {
                state.fetches.cancel(id)
                continue
            }
            if exceptWaitedOn, state.fetches.isWaitedOn(transfer.position..<max(transfer.position, transfer.reach)) { continue }
            state.fetches.cancel(id)
            fetcher.cancel(id)
        }
    }

    /// Evicts every cached byte unless the file is pinned, a transfer runs,
    /// a read waits or the kernel reads the file; returns whether it did.
    public func evict() -> Bool {
        let marked: Bool? = lock.withLock { state in
            // A pinned file's bytes are kept whatever the limits say; only a
            // purge (the user's own word) drops them.
            guard !state.use.pinned, state.fetches.transfers.isEmpty, state.fetches.waits.isEmpty, !state.handles.kernelReading else { return nil }
            guard !state.bytes.present.isEmpty else { return false }
            state.markReset()
            return true
        }
        guard let marked else { return false }
        guard marked else { return true }
        finishFreeing()
        Log.info("evicted \(source.displayURL) from the cache")
        return true
    }

    /// Frees cached bytes until at most `target` bytes remain: first the
    /// bytes furthest behind the last read (played already), then those
    /// furthest ahead. Never the bytes a read waits on. For a file larger
    /// than the whole cache, which still plays, but is not all kept.
    public func trim(to target: Int64) {
        let doomed = lock.withLock { state in
            var excess = state.bytes.present.byteCount - target
            var doomed = ByteRangeSet()
            // Bytes the kernel reads in place stay until its handles close;
            // a pinned file's bytes stay, however far over the limit.
            guard excess > 0, state.bytes.hasEntry, !state.handles.kernelReading, !state.use.pinned else { return doomed }
            let lastReadOffset = state.bytes.lastReadOffset
            let behind = state.bytes.present.ranges.filter { $0.upperBound <= lastReadOffset }
            let ahead = Array(state.bytes.present.ranges.filter { $0.upperBound > lastReadOffset }.reversed())
            for range in behind + ahead where excess > 0 {
                if state.fetches.isWaitedOn(range) { continue }
                let count = min(Int64(range.count), excess)
                // Behind the reader, drop from the oldest end; ahead, from the far end.
                let part = range.upperBound <= lastReadOffset
                    ? range.lowerBound..<(range.lowerBound + count)
                    : (range.upperBound - count)..<range.upperBound
                doomed.insert(part)
                excess -= count
            }
            return Self.markTrimmed(doomed, in: &state)
        }
        freeTrimmed(doomed, why: "to keep the cache within its limit")
    }

    /// How far into a file, from its start and from its end, a library
    /// scan's probe reads: headers, the first packets of each stream, an
    /// MP4's `moov` or a Matroska file's cues at the end. A 64th of the
    /// file, 2 MiB at least (ffprobe's analysis of a 1 MB/s file reads a
    /// megabyte), 64 MiB at most.
    static func probeSpan(length: Int64) -> Int64 {
        min(max(length / 64, 2 << 20), 64 << 20)
    }

    /// For a file only library scans have read: frees its cached bytes
    /// outside its probe ranges (`probeSpan` at either end, and within
    /// them what the scans read, when this mount saw them): a thumbnail's,
    /// at a tenth of the film, and the lookup's bytes no probe read. The scan budget does this to every such file
    /// before it evicts any whole, so the next scan of an unchanged file
    /// finds what its probe reads. Never the bytes a read waits on.
    public func trimToProbeRanges() {
        let doomed = lock.withLock { state in
            var doomed = ByteRangeSet()
            guard state.use.scanOnly, state.bytes.hasEntry, !state.handles.kernelReading, !state.use.pinned,
                  let length = state.version.info?.length else { return doomed }
            let span = Self.probeSpan(length: length)
            // Kept: the probe spans at either end; within them, when this
            // mount saw the scans read, only what they read and the index
            // the lookahead fetched (whole pages around them), not the
            // lookup's whole first 512 KiB beside ffprobe's 262 KB. Not
            // that finer cut while a handle is open: its probe may read on.
            let known = !state.bytes.scanRead.isEmpty && state.handles.openHandles == 0
            var keep = ByteRangeSet()
            for end in [0..<min(span, length), max(0, length - span)..<length] {
                guard known else { keep.insert(end); continue }
                for read in state.bytes.scanRead.ranges where read.overlaps(end) {
                    let lower = max(read.lowerBound, end.lowerBound) / Self.page * Self.page
                    let upper = min((min(read.upperBound, end.upperBound) + Self.page - 1) / Self.page * Self.page, length)
                    keep.insert(lower..<upper)
                }
            }
            for range in state.bytes.present.ranges {
                for part in keep.missing(in: range) where !state.fetches.isWaitedOn(part) { doomed.insert(part) }
            }
            return Self.markTrimmed(doomed, in: &state)
        }
        freeTrimmed(doomed, why: "a scan read, keeping its probe ranges")
    }

    /// Step 1 of a trim: `doomed` unclaimed and marked; returns it.
    private static func markTrimmed(_ doomed: ByteRangeSet, in state: inout LoaderState) -> ByteRangeSet {
        state.markTrim(doomed)
        return doomed
    }

    /// Steps 2-4 of a trim marked with `markTrimmed`, and its log line.
    private func freeTrimmed(_ doomed: ByteRangeSet, why: String) {
        guard !doomed.isEmpty else { return }
        finishFreeing()
        Log.info("dropped \(doomed.byteCount) bytes of \(source.displayURL) \(why)")
    }

    /// Steps 2–4 for every freeing marked so far. Returns at once when none
    /// is. Call with no lock held, and never on the network thread.
    func finishFreeing() {
        guard lock.withLock({ $0.bytes.isFreeingAnything }) else { return }
        flushLock.withLock { savedClaims in finishFreeingHoldingFlushLock(&savedClaims) }
    }

    /// One freeing's steps 2 and 3 as drained under the lock: what to
    /// persist and free once it is let go.
    private struct Freeing {
        var resetsTarget: Int
        var resetting: Bool
        var doomed: ByteRangeSet
        var snapshot: (meta: EntryMeta, file: DataFile?)?
        var file: DataFile?
        var length: Int64?
        var replace: Bool
        var persisted: Bool
    }

    private func finishFreeingHoldingFlushLock(_ savedClaims: inout Bool) {
        while let freeing = lock.withScope({ drainFreeing($0) }) {
            var persisted = freeing.persisted
            if let snapshot = freeing.snapshot {
                do {
                    try persist(snapshot, savedClaims: &savedClaims)
                } catch {
                    statistics.cacheWriteFailed(error as? MediaError ?? MediaError.io("\(error)"))
                    persisted = forgetMeta(&savedClaims)
                }
            }
            if !persisted {
                Log.error("\(source.displayURL): keeping bytes the cache metadata may still claim")
            } else if freeing.replace, let length = freeing.length {
                replaceDataFile(length: length)
            } else if let file = freeing.file {
                free(doomed: freeing.resetting ? nil : freeing.doomed, of: file, length: freeing.length)
            }
            let done = lock.withLock { state in
                if !persisted {
                    // Left marked: nothing is written or claimed there until a
                    // later freeing manages to persist.
                    state.markUnsaved()
                    return false
                }
                if freeing.resetting { state.bytes.resetsDone(upTo: freeing.resetsTarget) }
                state.bytes.trimDone(freeing.doomed)
                return true
            }
            guard done else { break }
            lock.broadcast()
        }
    }

    /// Waits for the reads and writes using the bytes of the freeing
    /// marked now, then takes what it needs to persist and free them;
    /// nil when no freeing is marked.
    private func drainFreeing(_ scope: borrowing ConditionLocked<LoaderState>.Scope) -> Freeing? {
        guard scope.state.bytes.isFreeingAnything else { return nil }
        let resetsTarget = scope.state.bytes.resetsAsked
        let resetting = resetsTarget > scope.state.bytes.resetsDone
        let doomed = scope.state.bytes.trimming
        func inUse(_ range: Range<Int64>) -> Bool { resetting || doomed.overlaps(range) }
        while scope.state.bytes.isInUse(inUse) {
            scope.wait()
        }
        let snapshot = metaSnapshot(&scope.state)
        // What is freed is in the data file as it is now, claimed or not.
        let file = openDataFile(&scope.state)
        // A file the kernel reads in place is left to it whole.
        let replace = resetting && scope.state.handles.kernelReading
        if snapshot != nil { scope.state.saved() }
        // No snapshot for an entry means its data file cannot be opened
        // now: the metadata cannot be rewritten, so nothing is freed.
        let persisted = snapshot != nil || !scope.state.bytes.hasEntry || scope.state.version.info == nil
        return Freeing(resetsTarget: resetsTarget, resetting: resetting, doomed: doomed, snapshot: snapshot,
                       file: file, length: scope.state.version.info?.length, replace: replace, persisted: persisted)
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
