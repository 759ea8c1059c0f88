// The data files open at once, across every loader of a mount: at most
// `capacity`, least recently used closed first, so a mount of 100,000
// entries holds a few hundred descriptors, not one per entry. The table
// holds the only lasting reference to each DataFile; a read or write in
// flight holds its own, so closing here never pulls a descriptor from
// under one (it closes when that one lets go). Never more than half the
// process's descriptor limit, read at each open: a limit lowered under a
// running mount (256, with 240 data files open) failed metadata reads, which
// forget an entry's bytes, before the table ever saw EMFILE.
//
// Lock: `lock` is a leaf: nothing is called, and no file opened, under it.
import Foundation
#if canImport(Glibc)
import Glibc
import MediaSupport
#endif

public final class OpenDataFiles: @unchecked Sendable {
    /// Descriptors a mount keeps open for data files by default.
    public static let defaultCapacity = 256

    private let lock = NSLock()
    // Guarded by `lock`.
    private var capacity: Int
    private var files: [ObjectIdentifier: (file: DataFile, used: UInt64)] = [:]
    private var clock: UInt64 = 0
    /// The soft RLIMIT_NOFILE now; a parameter for tests.
    private let descriptorLimit: () -> Int

    public init(capacity: Int = .max, descriptorLimit: @escaping () -> Int = OpenDataFiles.softDescriptorLimit) {
        self.capacity = max(capacity, Self.minimumCapacity)
        self.descriptorLimit = descriptorLimit
    }

    public static func softDescriptorLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return .max }
        return Int(clamping: limit.rlim_cur)
    }

    /// Fewer than this, and a handful of streams would close each other's files.
    public static let minimumCapacity = 8

    /// The open data file of `owner`, opening it with `open` (called with no
    /// lock held) when it is not. When the process is out of descriptors,
    /// the table shrinks (least recently used first) and tries once more,
    /// so a low RLIMIT_NOFILE costs some reopening, not the cache.
    public func file(for owner: ObjectIdentifier, open: () throws -> DataFile) throws -> DataFile {
        if let file = touch(owner) { return file }
        let opened: DataFile
        do {
            opened = try open()
        } catch let error as MediaError where error.errno == EMFILE || error.errno == ENFILE {
            guard shrink() else { throw error }
            opened = try open()
        }
        // The other half: connections, metadata files being read or saved.
        let allowed = max(min(capacity, descriptorLimit() / 2), Self.minimumCapacity)
        lock.lock()
        defer { lock.unlock() }
        clock += 1
        // Another thread may have opened it meanwhile: keep one.
        if let existing = files[owner] {
            files[owner]!.used = clock
            return existing.file
        }
        files[owner] = (opened, clock)
        if files.count > allowed { dropOldest(files.count - allowed) }
        return opened
    }

    /// Out of descriptors: keep three quarters of the files open now, at
    /// most, from now on. Returns whether any was closed.
    private func shrink() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        guard files.count > Self.minimumCapacity else { return false }
        capacity = max(files.count * 3 / 4, Self.minimumCapacity)
        Log.warning("out of file descriptors: keeping at most \(capacity) cache data files open")
        dropOldest(files.count - capacity)
        return true
    }

    /// Call with `lock` held.
    private func dropOldest(_ count: Int) {
        guard count > 0 else { return }
        for owner in files.sorted(by: { $0.value.used < $1.value.used }).prefix(count).map(\.key) {
            files[owner] = nil
        }
    }

    /// The open data file of `owner`, if open, marked as just used.
    public func touch(_ owner: ObjectIdentifier) -> DataFile? {
        lock.lock()
        defer { lock.unlock() }
        guard let entry = files[owner] else { return nil }
        clock += 1
        files[owner]!.used = clock
        return entry.file
    }

    /// Makes `file` (or none) the open data file of `owner`.
    public func replace(_ owner: ObjectIdentifier, with file: DataFile?) {
        lock.lock()
        defer { lock.unlock() }
        clock += 1
        files[owner] = file.map { ($0, clock) }
    }

    /// How many data files are open now.
    public var count: Int {
        lock.lock()
        defer { lock.unlock() }
        return files.count
    }
}
