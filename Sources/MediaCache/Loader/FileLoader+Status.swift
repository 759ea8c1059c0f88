// What a FileLoader says of itself to those outside its read path: its
// status for xattrs and `mediafs status`, its usage for the evictor,
// whether a read's failure is the one to log, and the failures a VOD's key
// arriving forgets.
import Foundation
import MediaSupport

extension FileLoader {
    public func status() -> FileStatus {
        lock.withLock { state in
            let shown: FileStatus.State
            if !state.fetches.transfers.isEmpty {
                shown = .fetching
            } else if let error = state.fetches.lastError {
                shown = .error(error.message)
            } else if case .failed(let error, _) = state.version.probe {
                shown = .error(error.message)
            } else {
                shown = .idle
            }
            var inFlight = ByteRangeSet()
            for transfer in state.fetches.transfers.values where !transfer.cancelled && transfer.position < transfer.reach {
                inFlight.insert(transfer.position..<transfer.reach)
            }
            return FileStatus(url: source.url, info: state.version.info, present: state.bytes.present, state: shown,
                              pinned: state.use.pinned, inFlight: inFlight, openHandles: state.handles.openHandles)
        }
    }

    /// What the evictor needs to know of this file.
    public func usage() -> FileUsage {
        let allocated = EntryRecord.allocatedBytes(forKey: key, in: store)
        return lock.withLock { state in
            FileUsage(allocatedBytes: state.bytes.hasEntry ? allocated : 0, cachedBytes: state.bytes.present.byteCount,
                      lastAccess: state.use.lastAccess,
                      isComplete: state.version.info.map { state.bytes.present.contains(0..<$0.length) } ?? false,
                      isBusy: !state.fetches.transfers.isEmpty || !state.fetches.waits.isEmpty
                          || state.handles.kernelReading,
                      isPinned: state.use.pinned, isScanOnly: state.use.scanOnly, isOpen: state.handles.openHandles > 0)
        }
    }

    /// Whether a read's failure is the first of this file's outage, to be
    /// logged (and marks it logged); false once one was since the last
    /// complete transfer.
    public func claimFailureLog() -> Bool {
        lock.withLock { state in
            state.fetches.claimOutageLog()
        }
    }

    /// The VOD it serves got the key it lacked: what its reads failed
    /// with, and their backoff, are forgotten, so the next read fetches.
    public func keyArrived() {
        lock.withLock { state in
            state.fetches.forgetFailures()
        }
    }
}
