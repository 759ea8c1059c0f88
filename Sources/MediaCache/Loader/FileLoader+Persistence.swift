// The file's attributes for getattr, and its metadata saved to the cache
// entry: one save at a time under `flushLock`, never claiming bytes the
// data file does not hold.
import Foundation
import MediaNetwork
import MediaStore
import MediaSupport

extension FileLoader {
    // MARK: Attributes and persistence

    /// Size and mtime for getattr; throws what the probe learned on failure.
    /// `lookup`: asked before a cold file's first probe, who looks it up
    /// (`Reader.streamsFromLookup`, `readsAfterLookup`).
    public func attributes(lookup: () -> Reader = { .player }) throws -> (size: Int64, mtime: Int) {
        Self.attributes(of: try contentInfo(lookup: lookup))
    }

    /// The attributes if the content info is known, without waiting: a
    /// listing hands these to the kernel with the names, and must never
    /// wait on the network for them.
    public func knownAttributes() -> (size: Int64, mtime: Int)? {
        lock.withLock { $0.version.info }.map(Self.attributes(of:))
    }

    static func attributes(of info: ContentInfo) -> (size: Int64, mtime: Int) {
        (info.length, info.lastModified.flatMap(HTTPDate.seconds) ?? 0)
    }

    /// Persists the metadata if it changed: data first (fdatasync), then the
    /// metadata, so it never claims bytes the data file does not hold.
    public func flush() {
        // The flusher's passes end the grace of closed handles nobody opened
        // again, and a player's lookup's stream no open took.
        lock.withLock { state in
            endLingering(&state, all: false)
            stopUnclaimedStream(in: &state)
        }
        finishFreeing()
        flushLock.withLock { savedClaims in flushHoldingFlushLock(&savedClaims) }
    }

    private func flushHoldingFlushLock(_ savedClaims: inout Bool) {
        let snapshot = lock.withLock { state -> (meta: EntryMeta, file: DataFile?)? in
            guard state.dirty, let snapshot = metaSnapshot(&state) else { return nil }
            state.saved()
            return snapshot
        }
        guard let snapshot else { return }
        do {
            try persist(snapshot, savedClaims: &savedClaims)
        } catch let error as MediaError {
            // Said once, like a failed data write; tried again at the next
            // flush. Until then the old metadata claims less, never more.
            statistics.cacheWriteFailed(error)
            markUnsaved()
        } catch {
            Log.error("cannot save cache metadata of \(source.displayURL): \(error)")
        }
    }

    /// The metadata as of now, with the data file whose bytes it claims
    /// (nil when it claims none). Nil when there is nothing to save, or the
    /// data file cannot be opened.
    func metaSnapshot(_ state: inout LoaderState) -> (meta: EntryMeta, file: DataFile?)? {
        guard state.bytes.hasEntry, let info = state.version.info else { return nil }
        var file: DataFile?
        if !state.bytes.present.isEmpty {
            guard let opened = openDataFile(&state) else { return nil }
            file = opened
        }
        return (EntryMeta(url: key, info: info, present: state.bytes.present, lastAccess: Int64(state.use.lastAccess),
                          lastValidated: state.version.lastValidated, pinned: state.use.pinned,
                          scanOnly: state.use.scanOnly && !state.bytes.present.isEmpty), file)
    }

    /// Makes the claimed bytes durable, then the metadata that claims them.
    /// Call with `flushLock` held (`savedClaims` is what it holds) and `lock` not held.
    func persist(_ snapshot: (meta: EntryMeta, file: DataFile?), savedClaims: inout Bool) throws {
        do {
            if let file = snapshot.file { try FileIO.syncData(fd: file.fd) }
            let claims = !snapshot.meta.present.isEmpty
            // Durable whenever it claims bytes, or replaces one that did
            // (a purge's must never be undone by a crash).
            let durable = claims || savedClaims
            if claims { savedClaims = true }
            try store.saveMeta(snapshot.meta, forKey: key, durable: durable)
            savedClaims = claims
        } catch let error as MediaError {
            throw MediaError(error.errno, "cannot save cache metadata of \(source.displayURL): \(error.message)")
        }
    }
}
