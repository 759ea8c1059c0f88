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
    /// The largest buffer a read call is given: a streaming read's
    /// quarter of the most it asks ahead (SFTPReadAhead).
    package static let readBufferSize = SFTPReadAhead.most / 4
    /// The largest call of a read that is no stream's window: libssh2
    /// keeps four of it asked ahead, 1 MiB, above the 625 KB a 50 Mbit/s
    /// link holds at 100 ms (see decision 0052 for what was measured).
    static let maxReadAsk = 256 << 10
    /// The smallest: a read of a few KiB asks for little more.
    static let minReadAsk = 32 << 10
    /// A kept file's attributes are asked again after this long, so a file
    /// written in place (same handle, new mtime) is told by its next read.
    static let recheckSeconds = 5.0

    /// The first read a caller makes of a file it opens: the read's
    /// requests go out with the open's fstat (`openFile`).
    package struct FirstRead {
        package let range: Range<Int64>
        package let streaming: Bool
        package init(range: Range<Int64>, streaming: Bool) {
            self.range = range
            self.streaming = streaming
        }
    }

    /// The file at `path`, open, with its size and mtime: a kept one, or
    /// opened now (open, then fstat with `first`'s read requests sent
    /// beside it: two round trips before the first bytes, not three), with
    /// how long the open took (`opening`: one round trip, the link's). A
    /// kept one whose date is not `validator` (the If-Range the read
    /// carries: the version it expects) is opened again: the file at that
    /// path may have been replaced (a rename) while the handle reads the
    /// one it opened. `buffer`: where a read sent early may land (its bytes
    /// are asked again then: the caller's `read` reads them).
    package func openFile(path: String, validator: String?, clock: Clock, first: FirstRead? = nil,
                          buffer: UnsafeMutableRawBufferPointer? = nil) throws
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
        roundTrip = opening
        var attributes = LIBSSH2_SFTP_ATTRIBUTES()
        var (stat, jumpOpen) = (LIBSSH2_ERROR_EAGAIN, JumpOpen.none)
        if let first, let buffer { (stat, jumpOpen) = statAndAsk(handle, path, &attributes, first, buffer: buffer) }
        if stat == LIBSSH2_ERROR_EAGAIN { stat = mediafs_sftp_fstat(handle, &attributes) }
        // An owed jump open is taken whatever the fstat said: libssh2 keeps
        // one open's state a session, and the next open of any file would
        // be given this one's handle.
        var jump: OpaquePointer?
        switch jumpOpen {
        case .none: break
        case .opened(let opened): jump = opened
        case .owed: jump = mediafs_sftp_open_read(sftp, path)
        }
        guard stat == 0 else {
            let error = sftpFailure("cannot stat '\(path)'")
            if !broken {
                libssh2_sftp_close_handle(handle)
                if let jump { libssh2_sftp_close_handle(jump) }
            }
            throw error
        }
        let entry = Self.entry(name: "", attributes)
        openFiles.keep(.init(handle: handle, jump: jump, size: entry.size, mtime: entry.mtime, used: now, checked: now),
                       at: path)
        return (entry.size, entry.mtime, opening)
    }

    /// Sends the fstat of a file just opened, `first`'s read requests and
    /// the open of the file's jump handle before waiting for any: libssh2,
    /// made non-blocking for it, sends each request and returns EAGAIN with
    /// its state kept, and the calls made after, blocking again, wait for
    /// the answers (each found by its request id), which come in the same
    /// round trip. Returns the fstat's result (EAGAIN while it is owed) and
    /// whether the jump's open is owed (the caller must take it). A read
    /// answered already (bytes in `buffer`) is dropped, its offset asked
    /// again by `read`.
    private func statAndAsk(_ handle: OpaquePointer, _ path: String, _ attributes: inout LIBSSH2_SFTP_ATTRIBUTES,
                            _ first: FirstRead, buffer: UnsafeMutableRawBufferPointer) -> (Int32, JumpOpen) {
        guard let session, let sftp else { return (LIBSSH2_ERROR_EAGAIN, .none) }
        libssh2_session_set_blocking(session, 0)
        defer { libssh2_session_set_blocking(session, 1) }
        // Answered at once (a near server, or this thread descheduled
        // after the send): the read and the jump go out all the same.
        let stat = mediafs_sftp_fstat(handle, &attributes)
        guard stat == LIBSSH2_ERROR_EAGAIN || stat == 0 else { return (stat, .none) }
        let start = UInt64(first.range.lowerBound)
        libssh2_sftp_seek64(handle, start)
        let ask = Self.ask(remaining: Int64(first.range.count), streaming: first.streaming, ahead: readAhead.bytes,
                           buffer: buffer.count)
        let read = libssh2_sftp_read(handle, buffer.baseAddress!.assumingMemoryBound(to: CChar.self), ask)
        if read != Int(LIBSSH2_ERROR_EAGAIN) {
            // Answered already, or failed: what was asked is dropped
            // (a seek), and `read` asks again from `start`.
            libssh2_sftp_seek64(handle, start)
        }
        // Sent now, taken by the caller's blocking open (which finds the
        // open under way and waits for its answer); answered at once, or
        // failed (no jump: nothing is owed).
        if let opened = mediafs_sftp_open_read(sftp, path) { return (stat, .opened(opened)) }
        return (stat, libssh2_session_last_errno(session) == LIBSSH2_ERROR_EAGAIN ? .owed : .none)
    }

    /// The jump handle's open, sent beside the fstat.
    private enum JumpOpen { case none, owed, opened(OpaquePointer) }

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
        // last one stopped keeps it. A read that is no stream's window and
        // does not go on where the file's handle is (an index at the end,
        // then the head's next bytes: a demuxer's probe) reads on the jump
        // handle, so what the file's handle asked ahead stays on its way.
        let start = UInt64(range.lowerBound)
        var handle = file.handle
        if libssh2_sftp_tell64(handle) != start, !streaming, let jump = file.jump { handle = jump }
        if libssh2_sftp_tell64(handle) != start { libssh2_sftp_seek64(handle, start) }
        var done: Int64 = 0
        let total = range.upperBound - range.lowerBound
        let started = Clock.system.monotonic()
        defer {
            if streaming {
                readAhead.windowRead(count: done, seconds: Clock.system.monotonic() - started, roundTrip: roundTrip)
            }
        }
        while done < total {
            let ask = Self.ask(remaining: total - done, streaming: streaming, ahead: readAhead.bytes, buffer: buffer.count)
            let count = libssh2_sftp_read(handle, buffer.baseAddress!.assumingMemoryBound(to: CChar.self), ask)
            if count == 0 { break }
            guard count > 0 else { throw sftpFailure("reading '\(path)' failed") }
            done += Int64(count)
            if !deliver(UnsafeRawBufferPointer(start: buffer.baseAddress, count: count)) { break }
        }
        return done
    }

    /// What one read call asks for with `remaining` bytes to go: a
    /// streaming window's a quarter of the session's ask-ahead (libssh2
    /// asks four ahead, past the window's end, for the next one), else
    /// `ask(remaining:buffer:)` within `maxReadAsk`.
    static func ask(remaining: Int64, streaming: Bool, ahead: Int, buffer: Int) -> Int {
        streaming ? Int(min(remaining, Int64(min(ahead / 4, buffer))))
            : ask(remaining: remaining, buffer: min(buffer, maxReadAsk))
    }

    /// What one read call asks for with `remaining` bytes to go: a quarter
    /// of it (libssh2 asks four times the call's buffer ahead, so a range's
    /// requests end near its end, not a megabyte past it), within the
    /// smallest ask and the buffer.
    static func ask(remaining: Int64, buffer: Int) -> Int {
        Int(min(remaining, Int64(min(max(Int(min(remaining / 4, Int64(Int32.max))), minReadAsk), buffer))))
    }
}
