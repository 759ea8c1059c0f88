// The cache's place on disk: `<root>/v1/<2 hex>/<sha256 of key>/{data,meta}`,
// `<root>/answers` (AnswerJournal: the metadata of entries that hold no
// bytes), `<root>/trash/` and `<root>/lock` (CacheLock); paths, atomic metadata
// replacement and removal. It must not decide what to fetch or evict, and holds
// no per-entry locks: callers serialize per entry. It follows no symlink it did
// not make: a planted `data` or `meta` link is a miss.
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import MediaSupport

public final class CacheStore: Sendable {
    package let root: String
    private let entriesRoot: String
    private let trashRoot: String
    /// Makes temp and trash names unique within this process; the pid covers other processes.
    private let counter = Atomic<Int>(0)
    private let trash: TrashWorker
    /// Probe answers: opened by the cache lock's holder (`openAnswers`).
    package let answers: AnswerJournal

    /// Creates the layout (0700) and refuses a root that another user owns or
    /// may write into: whoever can write there decides what the mount serves.
    package init(root: String) throws {
        self.root = root
        entriesRoot = root + "/v1"
        trashRoot = root + "/trash"
        trash = TrashWorker(directory: trashRoot)
        answers = AnswerJournal(path: root + "/answers")
        if let code = makeDirectories(root, mode: 0o700) {
            throw MediaError(code, "cannot create cache directory \(root): \(String(cString: strerror(code)))")
        }
        try Self.checkOwnership(root)
        for dir in [entriesRoot, trashRoot] {
            if let code = makeDirectories(dir, mode: 0o700) {
                throw MediaError(code, "cannot create cache directory \(dir): \(String(cString: strerror(code)))")
            }
            var st = stat()
            guard lstat(dir, &st) == 0, st.st_mode & S_IFMT == S_IFDIR else {
                throw MediaError(ENOTDIR, "cache directory \(dir) is not a directory (a symlink?); refusing it")
            }
        }
        // mkdir succeeds on an existing read-only directory, so only a real
        // file creation proves the cache can be written.
        let probe = "\(entriesRoot)/.probe.\(getpid()).\(counter.wrappingAdd(1, ordering: .relaxed).oldValue)"
        let fd = FileIO.retryingEINTR { open(probe, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600) }
        guard fd >= 0 else {
            let code = errno
            throw MediaError(code, "cache directory \(entriesRoot) is not writable: \(String(cString: strerror(code)))")
        }
        close(fd)
        unlink(probe)
    }

    deinit {
        trash.stop()
    }

    /// Finishes the trash deletion requested so far and joins its thread;
    /// removals after this delete in the caller. Call at unmount, after the
    /// last flush and eviction, and before an offline command exits.
    package func stop() {
        trash.stop()
    }

    private static func checkOwnership(_ root: String) throws {
        var st = stat()
        guard stat(root, &st) == 0 else { throw MediaError.system("cannot stat cache directory \(root)") }
        guard st.st_uid == geteuid() else {
            throw MediaError(EACCES, "cache directory \(root) belongs to uid \(st.st_uid), not to uid \(geteuid()) "
                             + "running mediafs; refusing a cache another user controls")
        }
        guard st.st_mode & 0o022 == 0 else {
            let mode = String(st.st_mode & 0o7777, radix: 8)
            throw MediaError(EACCES, "cache directory \(root) is writable by other users (mode \(mode)); refusing it "
                             + "(chmod go-w \(root) to use it)")
        }
    }

    package func directory(forKey key: String) -> String {
        let hash = SHA256.hex(key)
        return "\(entriesRoot)/\(hash.prefix(2))/\(hash)"
    }

    /// What reading an entry's metadata found.
    package enum MetaRead {
        case found(EntryMeta)
        /// None, or none worth trusting (damage is logged).
        case missing
        /// It could not be read now (out of descriptors or memory, an I/O
        /// error, a call to try again): it may well claim bytes, so the
        /// entry must not be treated as new, which would write over them.
        case unreadable(MediaError)
    }

    /// The entry's metadata, or nil when there is none worth trusting or it
    /// cannot be read now.
    package func loadMeta(forKey key: String) -> EntryMeta? {
        if case .found(let meta) = readMeta(forKey: key) { return meta }
        return nil
    }

    /// Opens the journal of probe answers; call holding the cache lock.
    /// Answers not accessed for `maxAge` seconds (the age of a partial
    /// entry the evictor drops) are dropped. Without it (a damaged file, a
    /// symlink in its place), answers are saved as entry directories, as
    /// they were before it. `now`: wall-clock seconds, what the age is from.
    package func openAnswers(maxAge: Double? = nil, now: Double) {
        guard !answers.isOpen else { return }
        do {
            try answers.open(accessedAfter: maxAge.map { Int64(now - $0) })
        } catch {
            Log.warning("\(error)")
        }
    }

    /// Saves probe answers: metadata claiming no bytes over metadata that
    /// claimed none, which needs no sync. In the journal when it is open,
    /// else one entry directory each. Throws the last failure.
    package func saveAnswers(_ metas: [EntryMeta]) throws {
        if answers.isOpen {
            do {
                return try answers.append(metas)
            } catch {
                Log.warning("\(error)")
            }
        }
        var failure: Error?
        for meta in metas {
            do {
                try saveMeta(meta, forKey: meta.url, durable: false)
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
    }

    /// The entry's metadata. Damage is logged and treated as a miss: the
    /// cache may forget, never invent. A probe answer in the journal is
    /// preferred to a meta file that claims no bytes when it is newer
    /// (the file was saved by a loader before its content changed); a meta
    /// file that claims bytes always wins, so an answer never hides claims
    /// a later write could make false.
    package func readMeta(forKey key: String) -> MetaRead {
        let onDisk = readMetaFile(forKey: key)
        guard let answer = answers.answer(forKey: key) else { return onDisk }
        switch onDisk {
        case .found(let meta) where !meta.present.isEmpty || meta.lastValidated >= answer.lastValidated:
            return onDisk
        case .unreadable:
            return onDisk
        default:
            return .found(answer)
        }
    }

    private func readMetaFile(forKey key: String) -> MetaRead {
        let dir = directory(forKey: key)
        let path = dir + "/meta"
        let meta: EntryMeta
        let bytes: [UInt8]
        do {
            bytes = try readWholeFile(path)
        } catch let error as MediaError where error.errno == ENOENT || error.errno == ENOTDIR {
            return .missing
        } catch let error as MediaError where cannotReadNow(error) {
            return .unreadable(error)
        } catch {
            Log.warning("ignoring cache metadata \(path): \(error)")
            return .missing
        }
        do {
            meta = try MetaFormat.decode(bytes)
        } catch {
            Log.warning("ignoring cache metadata \(path): \(error)")
            return .missing
        }
        guard meta.url == key else {
            Log.warning("ignoring cache metadata \(path): it is for \(MediaError.redacted(meta.url)), not \(MediaError.redacted(key))")
            return .missing
        }
        var st = stat()
        if lstat(dir + "/data", &st) == 0 && st.st_mode & S_IFMT != S_IFREG {
            Log.warning("ignoring cache metadata \(path): its data is not a regular file")
            return .missing
        }
        if let end = meta.present.ranges.last?.upperBound {
            let size: Int64 = lstat(dir + "/data", &st) == 0 ? Int64(st.st_size) : 0
            guard end <= size else {
                Log.warning("ignoring cache metadata \(path): claims bytes up to \(end) but data holds \(size)")
                return .missing
            }
        }
        return .found(meta)
    }

    /// Replaces the entry's metadata atomically and durably. The caller must
    /// have made the data bytes it claims durable first.
    /// Not `durable`: no fsync, for metadata that claims no bytes over
    /// metadata that claimed none either (a probe's content info): losing
    /// it costs a probe, a torn one fails its checksum, and 100,000 fsyncs
    /// would take minutes at unmount.
    package func saveMeta(_ m: EntryMeta, forKey key: String, durable: Bool = true) throws {
        let dir = try entryDirectory(forKey: key, durable: durable)
        let temp = "\(dir)/meta.tmp.\(getpid()).\(counter.wrappingAdd(1, ordering: .relaxed).oldValue)"
        let fd = FileIO.retryingEINTR { open(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600) }
        guard fd >= 0 else {
            let code = errno
            throw MediaError.system("cannot create \(temp)", errno: code)
        }
        do {
            defer { close(fd) }
            try FileIO.writeFully(fd: fd, from: MetaFormat.encode(m), at: 0)
            if durable { try FileIO.sync(fd: fd) }
        } catch let error as MediaError {
            unlink(temp)
            throw MediaError(error.errno, "cannot write \(temp): \(error.message)")
        }
        guard rename(temp, dir + "/meta") == 0 else {
            let code = errno
            unlink(temp)
            throw MediaError.system("cannot rename \(temp) to meta", errno: code)
        }
        if durable, let code = syncDirectory(dir) ?? syncDirectory(parentDirectory(of: dir)) {
            // The entry's own directory too: a probe's save made it without.
            throw MediaError.system("cannot fsync \(dir)", errno: code)
        }
    }

    /// Removes the entry's metadata durably, making the entry a miss: for
    /// when it cannot be rewritten and might claim bytes about to be freed.
    package func forgetMeta(forKey key: String) throws {
        let dir = directory(forKey: key)
        if unlink(dir + "/meta") != 0 && errno != ENOENT {
            let code = errno
            throw MediaError.system("cannot remove \(dir)/meta", errno: code)
        }
        if let code = syncDirectory(dir) { throw MediaError.system("cannot fsync \(dir)", errno: code) }
    }

    /// Makes the entry's directory (durably in its parent) ahead of its
    /// first bytes, on a thread that may wait: the network thread then only
    /// opens and writes the data file, it never mkdirs or fsyncs.
    package func prepareEntry(forKey key: String) throws {
        _ = try entryDirectory(forKey: key)
    }

    /// Opens the entry's sparse data file at full length; the caller closes
    /// the fd. Anything but a regular file in its place (a planted symlink)
    /// is removed and a fresh, empty file made.
    package func openData(forKey key: String, length: Int64) throws -> Int32 {
        let path = try entryDirectory(forKey: key) + "/data"
        var fd = FileIO.retryingEINTR { open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600) }
        var st = stat()
        if fd < 0 && errno == ELOOP || fd >= 0 && fstat(fd, &st) == 0 && st.st_mode & S_IFMT != S_IFREG {
            if fd >= 0 { close(fd) }
            Log.warning("replacing \(path): not a regular file")
            guard unlink(path) == 0 else { throw MediaError.system("cannot remove \(path)") }
            fd = FileIO.retryingEINTR { open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600) }
        }
        guard fd >= 0 else {
            let code = errno
            throw MediaError.system("cannot open \(path)", errno: code)
        }
        guard fstat(fd, &st) == 0 else {
            let code = errno
            close(fd)
            throw MediaError.system("cannot stat \(path)", errno: code)
        }
        if Int64(st.st_size) != length {
            do {
                try FileIO.truncate(fd: fd, to: length)
            } catch let error as MediaError {
                close(fd)
                throw MediaError.system("cannot size \(path) to \(length) bytes", errno: error.errno)
            }
        }
        return fd
    }

    /// Moves the entry's data file into trash/, for a file someone still
    /// reads: its blocks are freed when the last reader closes it.
    package func discardData(forKey key: String) {
        let dir = directory(forKey: key)
        let doomed = "\(trashRoot)/\(dir.suffix(64)).data.\(getpid()).\(counter.wrappingAdd(1, ordering: .relaxed).oldValue)"
        if rename(dir + "/data", doomed) != 0 && errno != ENOENT {
            Log.warning("cannot move \(dir)/data to trash: \(String(cString: strerror(errno)))")
            return
        }
        trash.request()
    }

    /// Forgets the entry. The rename into trash comes first so no reader ever
    /// finds an entry half deleted.
    package func remove(key: String) {
        remove(directory: directory(forKey: key))
    }

    /// Renames the entry into trash/ at once (so nobody sees half of it),
    /// then deletes trash on the trash worker, so no reader waits on a large
    /// unlink.
    package func remove(directory dir: String) {
        let doomed = "\(trashRoot)/\(dir.suffix(64)).\(getpid()).\(counter.wrappingAdd(1, ordering: .relaxed).oldValue)"
        if rename(dir, doomed) != 0 {
            let code = errno
            if code != ENOENT {
                Log.warning("cannot move \(dir) to trash: \(String(cString: strerror(code)))")
            }
            return
        }
        trash.request()
    }

    /// One entry on disk, as the evictor and `mediafs cache ls` see it.
    package struct StoredEntry: Sendable {
        package var directory: String
        /// Nil when the metadata is missing or damaged (the entry is
        /// garbage), or when it cannot be read now (`unreadable`).
        package var meta: EntryMeta?
        /// Disk blocks the entry really takes (sparse data counts as held).
        package var allocatedBytes: Int64
        /// Why the metadata cannot be read now (out of descriptors, an I/O
        /// error): the entry is unknown, not garbage.
        package var unreadable: MediaError?
    }

    /// Every entry on disk but those in `excluding` (directories), whose
    /// files are not even read: a mount's own entries are known through
    /// their loaders, and reading 100,000 of them again doubled a remount.
    package func entries(excluding: Set<String> = []) -> [StoredEntry] {
        let files = FileManager.default
        var result: [StoredEntry] = []
        for shard in (try? files.contentsOfDirectory(atPath: entriesRoot)) ?? [] where shard.count == 2 {
            for name in (try? files.contentsOfDirectory(atPath: "\(entriesRoot)/\(shard)")) ?? [] {
                let dir = "\(entriesRoot)/\(shard)/\(name)"
                if excluding.contains(dir) { continue }
                result.append(entry(inDirectory: dir))
            }
        }
        return result
    }

    /// The entry in `dir` (a directory `entries` lists), read from disk.
    package func entry(inDirectory dir: String) -> StoredEntry {
        var entry = StoredEntry(directory: dir, meta: nil, allocatedBytes: 0)
        do {
            let bytes = try readWholeFile(dir + "/meta")
            entry.meta = try? MetaFormat.decode(bytes)
        } catch let error as MediaError where cannotReadNow(error) {
            entry.unreadable = error
        } catch {
            // None, or not a regular file: garbage, as damage is.
        }
        for file in (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? [] {
            var st = stat()
            if lstat("\(dir)/\(file)", &st) == 0 { entry.allocatedBytes += Int64(st.st_blocks) * 512 }
        }
        return entry
    }

    /// The probe answers in the journal, as entries that hold nothing: for
    /// `mediafs cache ls`, read as they are, beside a running mount too.
    package func answerEntries() -> [StoredEntry] {
        AnswerJournal.read(path: answers.path).map { StoredEntry(directory: answers.path, meta: $0, allocatedBytes: 0) }
    }

    /// Free space on the cache's file system, for `--cache-min-free`.
    package func freeBytes() -> Int64? {
        var fs = statvfs()
        guard statvfs(root, &fs) == 0 else { return nil }
        return Int64(fs.f_bavail) * Int64(fs.f_frsize)
    }

    /// Deletes what is in trash/ now, in the caller: entries removed
    /// earlier, also by a process that stopped before it was done.
    package func emptyTrash() {
        trash.emptyNow()
    }

    /// The entry's directory, made if need be; made durably in its parent
    /// unless `durable` is false (a probe's save: syncing 100,000 new
    /// directories one by one took most of an unmount).
    private func entryDirectory(forKey key: String, durable: Bool = true) throws -> String {
        let dir = directory(forKey: key)
        if let code = makeDirectories(parentDirectory(of: dir), mode: 0o700)
            ?? makeDirectories(dir, mode: 0o700, durable: durable) {
            throw MediaError.system("cannot create \(dir)", errno: code)
        }
        return dir
    }
}

/// mkdir -p. Returns the errno of the failure, or nil. A directory it creates
/// is made durable in its parent (when `durable`) so a crash cannot lose a
/// committed entry.
private func makeDirectories(_ path: String, mode: mode_t, durable: Bool = true) -> Int32? {
    var st = stat()
    if stat(path, &st) == 0 {
        return (st.st_mode & S_IFMT) == S_IFDIR ? nil : ENOTDIR
    }
    let parent = parentDirectory(of: path)
    if parent != path, let code = makeDirectories(parent, mode: mode, durable: durable) { return code }
    if mkdir(path, mode) != 0 {
        let code = errno
        return code == EEXIST ? nil : code
    }
    if durable { _ = syncDirectory(parent) }
    return nil
}

package func parentDirectory(of path: String) -> String {
    guard let slash = path.lastIndex(of: "/") else { return "." }
    return slash == path.startIndex ? "/" : String(path[..<slash])
}

/// Makes the names made, renamed or removed in the directory at `path`
/// durable. Returns the errno of the failure, or nil.
package func syncDirectory(_ path: String) -> Int32? {
    let fd = FileIO.retryingEINTR { open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
    guard fd >= 0 else { return errno }
    defer { close(fd) }
    do {
        try FileIO.sync(fd: fd)
        return nil
    } catch {
        return (error as? MediaError)?.errno ?? EIO
    }
}

/// Whether a failure to open or read a file says nothing of the file itself:
/// out of descriptors or memory, an I/O error, a call to try again (a lease,
/// a busy network file system). FileIO repeats an interrupted call.
private func cannotReadNow(_ error: MediaError) -> Bool {
    [EMFILE, ENFILE, ENOMEM, EIO, EAGAIN].contains(error.errno)
}

/// Metadata of a file in a million pieces takes a few tens of MiB; more is damage.
private let maxWholeFile: Int64 = 64 << 20

private func readWholeFile(_ path: String) throws -> [UInt8] {
    // O_NONBLOCK: a FIFO in a file's place must not hang the caller.
    let fd = FileIO.retryingEINTR { open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) }
    guard fd >= 0 else {
        let code = errno
        throw MediaError.system("cannot open \(path)", errno: code)
    }
    defer { close(fd) }
    var st = stat()
    guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG, Int64(st.st_size) <= maxWholeFile else {
        throw MediaError(EINVAL, "\(path) is not a regular file of at most \(maxWholeFile) bytes")
    }
    var result: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let n: Int
        do {
            let offset = Int64(result.count)
            n = try buffer.withUnsafeMutableBytes { try FileIO.readFully(fd: fd, into: $0, at: offset) }
        } catch let error as MediaError {
            throw MediaError(error.errno, "cannot read \(path): \(error.message)")
        }
        if n == 0 { return result }
        guard Int64(result.count + n) <= maxWholeFile else {
            throw MediaError(EINVAL, "\(path) grew past \(maxWholeFile) bytes while read")
        }
        result += buffer[..<n]
    }
}
