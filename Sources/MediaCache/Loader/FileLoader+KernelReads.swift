// Handles whose reads the kernel serves from the data file itself (FUSE
// passthrough), without asking the loader. While any is open, cached bytes
// are never changed in place: a purge or a change moves the data file to the
// trash and starts a new one, so those handles go on reading the bytes they
// opened, whole and unmixed, and are freed when the last one closes.
#if canImport(Glibc)
import Glibc
import MediaStore
import MediaSupport
#endif

extension FileLoader {
    /// When every byte is cached: a descriptor of the data file (a copy the
    /// caller closes) and its version, and the file is kept as it is until
    /// as many `endKernelReads(version:)`. Nil while any byte is missing.
    public func beginKernelReads() -> (fd: Int32, version: Int)? {
        lock.withLock { state in
            guard let info = state.version.info, state.bytes.present.contains(0..<info.length),
                  let dataFile = openDataFile(&state) else { return nil }
            let copy = fcntl(dataFile.fd, F_DUPFD_CLOEXEC, 0)
            guard copy >= 0 else { return nil }
            let version = state.handles.kernelReaderAdded()
            state.accessed(at: wallNow())
            return (copy, version)
        }
    }

    /// Ends one `beginKernelReads` of data file `version`: its last handle
    /// closed. Those of a data file since replaced count for nothing.
    public func endKernelReads(version: Int) {
        lock.withLock { state in
            state.handles.kernelReaderRemoved(version: version)
        }
    }

    /// Whether `version` (from `beginKernelReads`) is still the data file,
    /// not one a purge or a change has replaced.
    public func isCurrentData(version: Int) -> Bool {
        lock.withLock { version == $0.handles.dataVersion }
    }

    /// Empties the cache by starting a new data file, leaving the old one
    /// to the kernel's readers. Call with no lock held, from a freeing.
    func replaceDataFile(length: Int64) {
        store.discardData(forKey: key)
        var fresh: DataFile?
        do {
            fresh = DataFile(fd: try store.openData(forKey: key, length: length))
        } catch {
            // Writing into the old file would change bytes the kernel reads:
            // no cache for this file until it is probed again.
            Log.error("\(source.displayURL): cannot start a new data file: \(error)")
        }
        lock.withLock { state in
            openFiles.replace(ObjectIdentifier(self), with: fresh)
            state.bytes.setHasEntry(fresh != nil)
            state.handles.dataFileReplaced()
        }
    }
}
