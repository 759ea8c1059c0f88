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
// Lock: `table` is a leaf: nothing is called, and no file opened, under it
// (a dropped DataFile may close its descriptor there).
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import MediaSupport

public final class OpenDataFiles: Sendable {
    /// Descriptors a mount keeps open for data files by default.
    package static let defaultCapacity = 256

    private struct Table {
        var capacity: Int
        var files: [ObjectIdentifier: (file: DataFile, used: UInt64)] = [:]
        var clock: UInt64 = 0

        /// The open data file of `owner`, if open, marked as just used.
        mutating func touch(_ owner: ObjectIdentifier) -> DataFile? {
            guard let entry = files[owner] else { return nil }
            clock += 1
            files[owner]!.used = clock
            return entry.file
        }

        mutating func dropOldest(_ count: Int) {
            guard count > 0 else { return }
            for owner in files.sorted(by: { $0.value.used < $1.value.used }).prefix(count).map(\.key) {
                files[owner] = nil
            }
        }
    }

    private let table: Locked<Table>
    /// The soft RLIMIT_NOFILE now; a parameter for tests.
    private let descriptorLimit: @Sendable () -> Int

    package init(capacity: Int = .max, descriptorLimit: @escaping @Sendable () -> Int = OpenDataFiles.softDescriptorLimit) {
        table = Locked(Table(capacity: max(capacity, Self.minimumCapacity)), rank: .openDataFiles)
        self.descriptorLimit = descriptorLimit
    }

    package static func softDescriptorLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return .max }
        return Int(clamping: limit.rlim_cur)
    }

    /// Fewer than this, and a handful of streams would close each other's files.
    package static let minimumCapacity = 8

    /// The open data file of `owner`, opening it with `open` (called with no
    /// lock held) when it is not. When the process is out of descriptors,
    /// the table shrinks (least recently used first) and tries once more,
    /// so a low RLIMIT_NOFILE costs some reopening, not the cache.
    package func file(for owner: ObjectIdentifier, open: () throws -> DataFile) throws -> DataFile {
        if let file = touch(owner) { return file }
        let opened: DataFile
        do {
            opened = try open()
        } catch let error as MediaError where error.errno == EMFILE || error.errno == ENFILE {
            guard shrink() else { throw error }
            opened = try open()
        }
        return adopt(opened, for: owner)
    }

    /// Makes `opened` the open data file of `owner`, unless another thread
    /// opened one meanwhile (then that one, and `opened` closes when let
    /// go): the second half of `file(for:open:)`, for a caller that opened
    /// it with no lock held and checked, under its own, that it is current.
    @discardableResult
    package func adopt(_ opened: DataFile, for owner: ObjectIdentifier) -> DataFile {
        // The other half: connections, metadata files being read or saved.
        let limit = descriptorLimit()
        return table.withLock { table in
            let allowed = max(min(table.capacity, limit / 2), Self.minimumCapacity)
            table.clock += 1
            // Another thread may have opened it meanwhile: keep one.
            if let existing = table.files[owner] {
                table.files[owner]!.used = table.clock
                return existing.file
            }
            table.files[owner] = (opened, table.clock)
            if table.files.count > allowed { table.dropOldest(table.files.count - allowed) }
            return opened
        }
    }

    /// Out of descriptors: keep three quarters of the files open now, at
    /// most, from now on. Returns whether any was closed.
    private func shrink() -> Bool {
        let kept: Int? = table.withLock { table in
            guard table.files.count > Self.minimumCapacity else { return nil }
            table.capacity = max(table.files.count * 3 / 4, Self.minimumCapacity)
            table.dropOldest(table.files.count - table.capacity)
            return table.capacity
        }
        guard let kept else { return false }
        Log.warning("out of file descriptors: keeping at most \(kept) cache data files open")
        return true
    }

    /// The open data file of `owner`, if open, marked as just used.
    package func touch(_ owner: ObjectIdentifier) -> DataFile? {
        table.withLock { $0.touch(owner) }
    }

    /// Makes `file` (or none) the open data file of `owner`.
    package func replace(_ owner: ObjectIdentifier, with file: DataFile?) {
        table.withLock { table in
            table.clock += 1
            table.files[owner] = file.map { ($0, table.clock) }
        }
    }

    /// How many data files are open now.
    package var count: Int {
        table.withLock { $0.files.count }
    }
}
