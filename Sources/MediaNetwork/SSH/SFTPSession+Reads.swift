// Reads of a file on a session's SFTP channel: the file opened once and
// kept (SFTPOpenFiles), each read a seek and reads of a large buffer, so
// libssh2 (1.10) sends several 30,000-byte read requests ahead of the
// data (four buffers' worth) instead of one request a round trip.
import CSSH2
import MediaSupport
#if canImport(Glibc)
import Glibc
#endif

extension SFTPSession {
    /// The largest buffer a read call is given: libssh2 keeps four of it
    /// asked ahead, 1 MiB, above the 625 KB a 50 Mbit/s link holds at
    /// 100 ms (see decision 0052 for what was measured).
    package static let readBufferSize = 256 << 10
    /// The smallest: a read of a few KiB asks for little more.
    static let minReadAsk = 32 << 10
    /// A kept file's attributes are asked again after this long, so a file
    /// written in place (same handle, new mtime) is told by its next read.
    static let recheckSeconds = 5.0

    /// The file at `path`, open, with its size and mtime: a kept one, or
    /// opened now (open and fstat: two round trips), with how long the
    /// open took (`opening`: one round trip, the link's). A kept one whose
    /// date is not `validator` (the If-Range the read carries: the version
    /// it expects) is opened again: the file at that path may have been
    /// replaced (a rename) while the handle reads the one it opened.
    package func openFile(path: String, validator: String?, clock: Clock) throws
        -> (size: Int64?, mtime: Int64?, opening: Double?) {
        guard let sftp else { throw failure(EIO, "no SFTP channel") }
        let now = clock.monotonic()
        openFiles.closeIdle(now: now)
        if var kept = openFiles.file(at: path) {
            if now - kept.checked >= Self.recheckSeconds {
                var attributes = LIBSSH2_SFTP_ATTRIBUTES()
                guard mediafs_sftp_fstat(kept.handle, &attributes) == 0 else { throw sftpFailure("cannot stat '\(path)'") }
                let entry = Self.entry(name: "", attributes)
                (kept.size, kept.mtime, kept.checked) = (entry.size, entry.mtime, now)
            }
            if validator == nil || validator == kept.mtime.flatMap(HTTPDate.text(seconds:)) {
                kept.used = now
                openFiles.keep(kept, at: path)
                return (kept.size, kept.mtime, nil)
            }
            openFiles.close(path)
        }
        hasOpenedFiles = true
        guard let handle = mediafs_sftp_open_read(sftp, path) else { throw sftpFailure("cannot open '\(path)'") }
        let opening = clock.monotonic() - now
        var attributes = LIBSSH2_SFTP_ATTRIBUTES()
        guard mediafs_sftp_fstat(handle, &attributes) == 0 else {
            let error = sftpFailure("cannot stat '\(path)'")
            if !broken { libssh2_sftp_close_handle(handle) }
            throw error
        }
        let entry = Self.entry(name: "", attributes)
        openFiles.keep(.init(handle: handle, size: entry.size, mtime: entry.mtime, used: now, checked: now), at: path)
        return (entry.size, entry.mtime, opening)
    }

    /// Reads `range` of the open file at `path` into `buffer`, handing
    /// each piece to `deliver` (false stops). Returns the bytes delivered;
    /// fewer than asked at the file's end.
    /// `streaming`: the read is a window of a sequential reader's, whose
    /// next window follows it: libssh2 is let ask ahead past its end, so
    /// the next one, on the same handle, finds its first bytes under way
    /// instead of waiting a round trip for them.
    package func read(path: String, range: Range<Int64>, streaming: Bool = false, buffer: UnsafeMutableRawBufferPointer,
                      deliver: (UnsafeRawBufferPointer) -> Bool) throws -> Int64 {
        guard let file = openFiles.file(at: path) else { throw failure(EIO, "'\(path)' is not open") }
        // A seek drops what was asked ahead; a read that goes on where the
        // last one stopped keeps it.
        if libssh2_sftp_tell64(file.handle) != UInt64(range.lowerBound) {
            libssh2_sftp_seek64(file.handle, UInt64(range.lowerBound))
        }
        var done: Int64 = 0
        let total = range.upperBound - range.lowerBound
        while done < total {
            let ask = streaming ? Int(min(total - done, Int64(buffer.count)))
                : Self.ask(remaining: total - done, buffer: buffer.count)
            let count = libssh2_sftp_read(file.handle, buffer.baseAddress!.assumingMemoryBound(to: CChar.self), ask)
            if count == 0 { break }
            guard count > 0 else { throw sftpFailure("reading '\(path)' failed") }
            done += Int64(count)
            if !deliver(UnsafeRawBufferPointer(start: buffer.baseAddress, count: count)) { break }
        }
        return done
    }

    /// What one read call asks for with `remaining` bytes to go: a quarter
    /// of it (libssh2 asks four times the call's buffer ahead, so a range's
    /// requests end near its end, not a megabyte past it), within the
    /// smallest ask and the buffer.
    static func ask(remaining: Int64, buffer: Int) -> Int {
        Int(min(remaining, Int64(min(max(Int(min(remaining / 4, Int64(Int32.max))), minReadAsk), buffer))))
    }
}
