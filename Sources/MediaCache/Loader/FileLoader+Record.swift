// A loader with nothing in flight gives way to its record (EntryRecord): the
// catalog keeps that instead, and makes a loader again from the cache when
// the file is next used. Only what the metadata on disk already says is lost.
import Foundation
import MediaStore

extension FileLoader {
    /// The record this loader may become, or nil while anything would be
    /// lost or cut short: a transfer, a waiting read, a pread or pwrite, a
    /// freeing, a probe, the kernel reading the data file or holding pages
    /// of a version before, a failure whose
    /// backoff a new loader would forget, or unsaved metadata, unless it
    /// claims no bytes over metadata that claimed none (a probe's answer):
    /// that comes along as `unsaved`, for the caller to save, which needs
    /// no sync and no loader. The data file's blocks are left for the
    /// caller to count (`allocatedBytes` 0).
    func idleRecord() -> (record: EntryRecord, unsaved: EntryMeta?)? {
        // Whether the metadata on disk claims bytes is known under
        // `flushLock`; one a save or a freeing holds is busy anyway.
        guard let claimsOnDisk = flushLock.withLockIfAvailable({ $0 }) else { return nil }
        return lock.withLock { state in
            // A new loader would take the kernel for clean: not before it is.
            guard state.fetches.transfers.isEmpty, state.fetches.waits.isEmpty, !state.bytes.isBusy,
                  !state.bytes.isFreeingAnything, state.handles.kernelReaders == 0, state.handles.kernelClean == state.version.generation else {
                return nil
            }
            var unsaved: EntryMeta?
            // One whose metadata could not be read has nothing to save: its
            // record says the metadata may exist, for the next loader to read.
            if state.dirty && !cacheUnusable {
                guard state.bytes.present.isEmpty, !claimsOnDisk, state.bytes.hasEntry, let snapshot = metaSnapshot(&state) else {
                    return nil
                }
                unsaved = snapshot.meta
            }
            let now = self.now()
            switch state.version.probe {
            case .idle: break
            // A new loader would probe again now just the same.
            case .retrying(let at) where now >= at: break
            case .failed(_, let at) where now - at >= settings.probeRetryAfter: break
            default: return nil
            }
            if state.fetches.lastError != nil, now - state.fetches.lastErrorAt < max(settings.probeRetryAfter, settings.unavailableFor) {
                return nil
            }
            if now < state.fetches.retryAt || now < state.fetches.unavailableUntil { return nil }
            let info = state.version.info
            let attributes = info.map(Self.attributes(of:))
            var record = EntryRecord(size: attributes?.size, mtime: attributes?.mtime ?? 0,
                                     cachedBytes: state.bytes.present.byteCount, allocatedBytes: 0,
                                     lastAccess: state.use.lastAccess,
                                     isComplete: info.map { state.bytes.present.contains(0..<$0.length) } ?? false,
                                     isPinned: state.use.pinned,
                                     // Metadata is saved only with content info.
                                     hasMeta: info != nil || cacheUnusable)
            record.listed = state.version.listed && info == nil
            if let info { record.take(info) }
            record.isScanOnly = state.use.scanOnly
            return (record, unsaved)
        }
    }

    /// Its metadata must be saved (again): it was made from metadata not
    /// on disk yet, or a save of an older one may have landed after its own.
    func markUnsaved() {
        lock.withLock { $0.markUnsaved() }
    }
}
