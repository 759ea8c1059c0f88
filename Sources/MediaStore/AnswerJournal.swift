// Probe answers, content info that claims no bytes (the entries of a
// listing or a list file, stat'ed and never read), kept in one append-only
// file, `<root>/answers`, instead of an entry directory each: saving two
// new inodes an answer fell behind the probes of a cold `ls -l` of a big
// listing, and an append of a batch costs a few µs an answer (decision 0009).
//
// After a header line, each frame is `a <length> <accessed>\n` and then the
// entry's metadata in MetaFormat, whose checksum guards it. The index maps
// a 64-bit hash of the URL to its last frame (place and length packed in
// one word; AnswerIndex, about 20 bytes a URL in memory): a read checks the URL it finds, so a
// collision is a miss, never another entry's info. Only the cache lock's
// holder opens it (`open`): it cuts a torn tail, and rewrites the file
// without superseded frames, or frames not accessed within the age limit
// of partial entries (a temp file, fsynced, renamed over it, and the rename
// fsynced: a crash leaves the old file or the new one, each whole).
// `mediafs cache ls` reads it without opening it.
// What CacheStore.readMeta prefers when an entry also has a meta file is
// decided there.
import Foundation
#if canImport(Glibc)
import Glibc
import MediaSupport
#endif

package final class AnswerJournal: Sendable {
    package static let header = Array("mediafs-answers 1\n".utf8)
    /// A frame's metadata is a URL and a few headers: longer is damage.
    package static let maxFrame = 1 << 20
    /// The place in a packed index word has 40 bits: past this the journal
    /// takes no more answers (about 4 million), and they go to meta files.
    package static let maxSize: Int64 = 1 << 30
    /// Superseded frames past this many, and past as many as the live
    /// ones, are rewritten away at the next open.
    package static let wasteAllowed = 1_024

    private struct State: Sendable {
        var fd: Int32 = -1
        /// Where the next frame goes: the end of the last whole frame.
        var end: Int64 = 0
        var index = AnswerIndex()
    }

    package let path: String
    private let state = Locked(State(), rank: .answerJournal)

    package init(path: String) {
        self.path = path
    }

    deinit {
        state.withLock { if $0.fd >= 0 { close($0.fd) } }
    }

    /// Opens (or makes) the journal for this process's use; call holding
    /// the cache lock, before any other call. Frames not accessed since
    /// `accessedAfter` (Unix seconds) are dropped. A damaged file is
    /// started afresh: the cache may forget, never invent.
    package func open(accessedAfter: Int64? = nil) throws {
        let fd = FileIO.retryingEINTR { Glibc.open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600) }
        guard fd >= 0 else { throw MediaError.system("cannot open \(path)") }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else {
            close(fd)
            throw MediaError(EINVAL, "\(path) is not a regular file; keeping probe answers in entry directories")
        }
        var scan = Self.scan(fd: fd, size: min(Int64(st.st_size), Self.maxSize))
        if scan.end == 0 || scan.end < Int64(st.st_size) {
            if scan.end == 0 && st.st_size > 0 {
                Log.warning("\(path) is not an answers journal of version 1; starting it afresh")
            } else if scan.end > 0 {
                Log.warning("\(path): cutting \(Int64(st.st_size) - scan.end) bytes after its last whole answer")
            }
            if scan.end == 0 {
                do {
                    try FileIO.truncate(fd: fd, to: 0)
                    try FileIO.writeFully(fd: fd, from: Self.header, at: 0)
                } catch let error as MediaError {
                    close(fd)
                    throw MediaError(error.errno, "cannot write \(path): \(error.message)")
                }
                scan = Scan(end: Int64(Self.header.count))
            } else {
                do {
                    try FileIO.truncate(fd: fd, to: scan.end)
                } catch let error as MediaError {
                    close(fd)
                    throw MediaError(error.errno, "cannot truncate \(path): \(error.message)")
                }
            }
        }
        let expired = accessedAfter.map { scan.oldestAccessed < $0 } ?? false
        let waste = scan.frames - scan.index.count
        if expired || waste > Self.wasteAllowed && waste > scan.index.count,
           let rewritten = rewrite(from: fd, index: scan.index, accessedAfter: accessedAfter) {
            close(fd)
            state.withLock { $0 = rewritten }
            Log.debug("\(path): \(rewritten.index.count) answers kept of \(scan.frames)")
            return
        }
        state.withLock { $0 = State(fd: fd, end: scan.end, index: scan.index) }
    }

    /// Whether `open` succeeded.
    package var isOpen: Bool { state.withLock { $0.fd >= 0 } }

    /// How many URLs have an answer.
    package var count: Int { state.withLock { $0.index.count } }

    /// Appends answers, in one write; each one claims no bytes. Throws
    /// when the journal is not open, full, or cannot be written: the
    /// caller saves them another way.
    package func append(_ metas: [EntryMeta]) throws {
        var bytes: [UInt8] = []
        var places: [(hash: UInt64, start: Int, length: Int)] = []
        for meta in metas where meta.present.isEmpty {
            let frame = Self.frame(meta)
            guard frame.count <= Self.maxFrame else { continue }
            places.append((Self.hash(meta.url), bytes.count, frame.count))
            bytes += frame
        }
        guard !bytes.isEmpty else { return }
        try state.withLock { state in
            guard state.fd >= 0 else { throw MediaError(EBADF, "\(path) is not open") }
            guard state.end + Int64(bytes.count) <= Self.maxSize else {
                throw MediaError(EFBIG, "\(path) holds \(Self.maxSize) bytes of answers")
            }
            do {
                try FileIO.writeFully(fd: state.fd, from: bytes, at: state.end)
            } catch let error as MediaError {
                // A frame half written would cut the ones after it at the next open.
                try? FileIO.truncate(fd: state.fd, to: state.end)
                throw MediaError(error.errno, "cannot append to \(path): \(error.message)")
            }
            for place in places {
                state.index[place.hash] = Self.pack(state.end + Int64(place.start), place.length)
            }
            state.end += Int64(bytes.count)
        }
    }

    /// The last answer saved for `url`, or nil (none, or none worth trusting).
    package func answer(forKey url: String) -> EntryMeta? {
        let hash = Self.hash(url)
        guard let (fd, word) = state.withLock({ state in state.index[hash].map { (state.fd, $0) } }) else {
            return nil
        }
        // Past `open`, the descriptor is closed only at deinit (or by an
        // offline `forget`), so reading outside the lock is safe; a frame
        // cut meanwhile (`clear`) reads short or fails its checksum.
        guard let meta = Self.readFrame(fd, word).flatMap(Self.decodeFrame), meta.url == url else { return nil }
        return meta
    }

    /// Forgets the answer of each URL (`mediafs cache clear URL`); returns
    /// those it had. The file is rewritten without them, and its old
    /// descriptor closed: offline only, with no reader.
    package func forget(_ urls: [String]) -> [String] {
        state.withLock { state in
            let had = urls.filter { url in
                state.index[Self.hash(url)].flatMap { Self.readFrame(state.fd, $0) }.flatMap(Self.decodeFrame)?.url == url
            }
            guard !had.isEmpty else { return [] }
            for url in had { state.index[Self.hash(url)] = nil }
            if let rewritten = rewrite(from: state.fd, index: state.index, accessedAfter: nil) {
                close(state.fd)
                state = rewritten
            }
            return had
        }
    }

    /// Forgets every answer (`mediafs cache clear`).
    package func clear() {
        state.withLock { state in
            guard state.fd >= 0, (try? FileIO.truncate(fd: state.fd, to: Int64(Self.header.count))) != nil else {
                return
            }
            state.end = Int64(Self.header.count)
            state.index = AnswerIndex()
        }
    }

    /// Every answer in the file at `path`, the last of each URL, without
    /// opening it for use: for `mediafs cache ls`, beside a running mount.
    package static func read(path: String) -> [EntryMeta] {
        let fd = FileIO.retryingEINTR { Glibc.open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) }
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { return [] }
        let scan = scan(fd: fd, size: min(Int64(st.st_size), maxSize))
        return scan.index.pairs.map(\.value).sorted().compactMap { readFrame(fd, $0).flatMap(decodeFrame) }
    }

    // MARK: Frames

    /// The whole frame an index word places, or nil when it reads short.
    private static func readFrame(_ fd: Int32, _ word: UInt64) -> [UInt8]? {
        let (offset, length) = unpack(word)
        var frame = [UInt8](repeating: 0, count: length)
        let n = frame.withUnsafeMutableBytes { try? FileIO.readFully(fd: fd, into: $0, at: offset) }
        return n == length ? frame : nil
    }

    package static func frame(_ meta: EntryMeta) -> [UInt8] {
        let body = MetaFormat.encode(meta)
        return Array("a \(body.count) \(meta.lastAccess)\n".utf8) + body
    }

    /// A whole frame's metadata, if it decodes and claims no bytes.
    private static func decodeFrame(_ frame: [UInt8]) -> EntryMeta? {
        guard let newline = frame.firstIndex(of: UInt8(ascii: "\n")),
              let meta = try? MetaFormat.decode(Array(frame[(newline + 1)...])), meta.present.isEmpty else {
            return nil
        }
        return meta
    }

    private struct Scan {
        /// The end of the last whole frame; 0 when even the header is wrong.
        var end: Int64
        var frames = 0
        var index = AnswerIndex()
        var oldestAccessed = Int64.max
    }

    /// Reads the frames' headers and URLs, a chunk at a time, up to the
    /// first damaged or partial one. Metadata is decoded only when read.
    private static func scan(fd: Int32, size: Int64) -> Scan {
        var buffer: [UInt8] = []
        var bufferStart: Int64 = 0
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        var eof = false
        /// Makes `count` bytes from `offset` available; false at the end.
        func have(_ offset: Int64, _ count: Int) -> Bool {
            while offset + Int64(count) > bufferStart + Int64(buffer.count) && !eof {
                let dropped = Int(offset - bufferStart)
                if dropped > 0 {
                    buffer.removeFirst(dropped)
                    bufferStart = offset
                }
                let readAt = bufferStart + Int64(buffer.count)
                let want = Int(min(Int64(chunk.count), size - readAt))
                let n = want <= 0 ? 0 : chunk.withUnsafeMutableBytes {
                    (try? FileIO.readFully(fd: fd, into: UnsafeMutableRawBufferPointer(rebasing: $0[..<want]), at: readAt)) ?? 0
                }
                if n <= 0 { eof = true } else { buffer += chunk[..<n] }
            }
            return offset + Int64(count) <= bufferStart + Int64(buffer.count)
        }
        func bytes(_ offset: Int64, _ count: Int) -> ArraySlice<UInt8> {
            let start = Int(offset - bufferStart)
            return buffer[start..<(start + count)]
        }
        guard have(0, header.count), Array(bytes(0, header.count)) == header else { return Scan(end: 0) }
        var scan = Scan(end: Int64(header.count))
        let longestHeader = 64
        while true {
            let offset = scan.end
            let available = have(offset, longestHeader) ? longestHeader : Int(bufferStart + Int64(buffer.count) - offset)
            guard available > 0 else { break }
            let head = bytes(offset, available)
            guard let newline = head.firstIndex(of: UInt8(ascii: "\n")),
                  let (length, accessed) = parseFrameHeader(head[head.startIndex..<newline]) else { break }
            let bodyStart = offset + Int64(newline - head.startIndex + 1)
            guard have(bodyStart, length) else { break }
            guard let url = urlLine(bytes(bodyStart, length)) else { break }
            scan.index[MetaFormat.fnv1a64(url)] = pack(offset, Int(bodyStart - offset) + length)
            scan.frames += 1
            scan.oldestAccessed = min(scan.oldestAccessed, accessed)
            scan.end = bodyStart + Int64(length)
        }
        return scan
    }

    /// `a <length> <accessed>`, bounded.
    private static func parseFrameHeader(_ line: ArraySlice<UInt8>) -> (Int, Int64)? {
        let parts = line.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].elementsEqual([UInt8(ascii: "a")]),
              let length = Limits.length(String(decoding: parts[1], as: UTF8.self)), length > 0,
              length <= Int64(maxFrame) else { return nil }
        guard let accessed = MetaFormat.parseNumber(Substring(decoding: parts[2], as: UTF8.self), allowNegative: true),
              Limits.unixSeconds.contains(accessed) else { return nil }
        return (Int(length), accessed)
    }

    /// The URL of a frame's metadata: its second line, `url <url>`.
    private static func urlLine(_ body: ArraySlice<UInt8>) -> ArraySlice<UInt8>? {
        let newline = UInt8(ascii: "\n")
        guard let first = body.firstIndex(of: newline) else { return nil }
        let rest = body[(first + 1)...]
        let prefix = Array("url ".utf8)
        guard rest.starts(with: prefix), let end = rest.firstIndex(of: newline) else { return nil }
        return rest[(rest.startIndex + prefix.count)..<end]
    }

    /// A new file with the live frames, accessed since `accessedAfter`,
    /// synced and renamed over the old one, and the rename synced; nil
    /// when it cannot be made (the old one stays in use).
    private func rewrite(from fd: Int32, index: AnswerIndex, accessedAfter: Int64?) -> State? {
        let temp = "\(path).tmp.\(getpid())"
        let out = FileIO.retryingEINTR { Glibc.open(temp, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o600) }
        guard out >= 0 else { return nil }
        var kept = State(fd: out, end: Int64(Self.header.count))
        var pending = Self.header
        var pendingStart: Int64 = 0
        var ok = true
        for (hash, word) in index.pairs.sorted(by: { $0.value < $1.value }) {
            guard let frame = Self.readFrame(fd, word) else { continue }
            if let accessedAfter, let newline = frame.firstIndex(of: UInt8(ascii: "\n")),
               let (_, accessed) = Self.parseFrameHeader(frame[..<newline]), accessed < accessedAfter {
                continue
            }
            kept.index[hash] = Self.pack(kept.end, frame.count)
            kept.end += Int64(frame.count)
            pending += frame
            if pending.count >= 1 << 20 {
                ok = ok && (try? FileIO.writeFully(fd: out, from: pending, at: pendingStart)) != nil
                pendingStart += Int64(pending.count)
                pending = []
            }
        }
        ok = ok && (try? FileIO.writeFully(fd: out, from: pending, at: pendingStart)) != nil
        // Renamed before its blocks reach the disk, a crash could leave the
        // name on an empty file: every answer lost, not only the latest.
        ok = ok && (try? FileIO.sync(fd: out)) != nil
        guard ok, rename(temp, path) == 0 else {
            close(out)
            unlink(temp)
            Log.warning("\(path): cannot rewrite it; keeping it as it is")
            return nil
        }
        if let code = syncDirectory(parentDirectory(of: path)) {
            // The new file is the journal now, whole: a crash may bring back the old one, whole too.
            Log.warning("\(path): cannot fsync its directory after rewriting it: \(String(cString: strerror(code)))")
        }
        return kept
    }

    // MARK: Helpers

    package static func hash(_ url: String) -> UInt64 { MetaFormat.fnv1a64(url.utf8) }

    private static func pack(_ offset: Int64, _ length: Int) -> UInt64 {
        UInt64(offset) << 24 | UInt64(length)
    }

    private static func unpack(_ word: UInt64) -> (offset: Int64, length: Int) {
        (Int64(word >> 24), Int(word & 0xFF_FFFF))
    }
}
