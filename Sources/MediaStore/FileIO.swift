// Reading and writing files at an offset, syncing them and punching holes
// in them: the one place where an interrupted call (EINTR) is repeated and a
// short read or write goes on where it stopped. Failures are MediaErrors
// carrying the errno and the call that failed; callers add which file.
// It must not decide what a failure means for the cache.
import CSystem
#if canImport(Glibc)
import Glibc
#endif
import MediaSupport

package enum FileIO {
    /// `call` (a system call answering -1 and errno on failure) repeated
    /// while a signal interrupts it.
    package static func retryingEINTR<Result: BinaryInteger>(_ call: () -> Result) -> Result {
        while true {
            let result = call()
            if result >= 0 || errno != EINTR { return result }
        }
    }

    /// Fills `buffer` from `offset` on, going on after short reads; fewer
    /// bytes (the count returned) only where the file ends.
    package static func readFully(fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws -> Int {
        var done = 0
        while done < buffer.count {
            let n = retryingEINTR { pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done)) }
            if n < 0 { throw MediaError.system("pread at byte \(offset + Int64(done))") }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// Writes all of `bytes` at `offset`, going on after short writes.
    package static func writeFully(fd: Int32, from bytes: UnsafeRawBufferPointer, at offset: Int64) throws {
        var done = 0
        while done < bytes.count {
            let n = retryingEINTR { pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done)) }
            if n < 0 { throw MediaError.system("pwrite at byte \(offset + Int64(done))") }
            if n == 0 { throw MediaError.io("pwrite at byte \(offset + Int64(done)) wrote nothing") }
            done += n
        }
    }

    /// `writeFully` of an array's bytes.
    package static func writeFully(fd: Int32, from bytes: [UInt8], at offset: Int64) throws {
        try bytes.withUnsafeBytes { try writeFully(fd: fd, from: $0, at: offset) }
    }

    /// Frees the blocks of `range` (they read as zeros) without changing
    /// the file's length: fallocate's FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE.
    package static func punchHole(fd: Int32, range: Range<Int64>) throws {
        guard !range.isEmpty else { return }
        if retryingEINTR({ mediafs_punch_hole(fd, range.lowerBound, Int64(range.count)) }) != 0 {
            throw MediaError.system("punching bytes \(range.lowerBound)-\(range.upperBound - 1)")
        }
    }

    /// Sets the file's length (ftruncate): cut, or extended with a hole.
    package static func truncate(fd: Int32, to length: Int64) throws {
        if retryingEINTR({ ftruncate(fd, off_t(length)) }) != 0 {
            throw MediaError.system("ftruncate to \(length) bytes")
        }
    }

    /// Makes the file's bytes and attributes durable (fsync).
    package static func sync(fd: Int32) throws {
        if retryingEINTR({ fsync(fd) }) != 0 { throw MediaError.system("fsync") }
    }

    /// Makes the file's bytes durable, and only the attributes needed to
    /// read them back (fdatasync).
    package static func syncData(fd: Int32) throws {
        if retryingEINTR({ fdatasync(fd) }) != 0 { throw MediaError.system("fdatasync") }
    }
}
