// The root's `readers`: who reads what, as `status --readers` shows it.
import Foundation

extension Catalog {
    /// Readers listed at most: the answer is an xattr (64 KiB at most),
    /// and a reader's row is a few hundred bytes.
    public static let readersListed = 96
    /// A file's path is cut to this many bytes in the list.
    static let readerFileLimit = 160

    /// Live readers, then ended ones, as a JSON array.
    public func readersJSON() -> String {
        let now = settings.clock.wall()
        let rows = readers.readers().prefix(Self.readersListed).map { account in
            ReaderRow(pid: account.process.pid, process: account.process.name, arguments: account.process.arguments,
                      parent: account.process.parentName, readClass: account.readClass.label,
                      file: ReaderProcess.cut(account.file, to: Self.readerFileLimit), bytesRead: account.bytesRead,
                      bytesFetched: account.bytesFetched, bytesPerSecond: Int64(account.rate(now: now)),
                      since: account.since, ended: account.endedAt, openHandles: account.openHandles,
                      kernelReads: account.kernelReads)
        }
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(Array(rows))).map { String(decoding: $0, as: UTF8.self) } ?? "[]"
    }

    /// One reader of one file, its keys in snake case.
    private struct ReaderRow: Encodable {
        var pid: Int32
        var process, arguments, parent: String
        var readClass: String
        var file: String
        var bytesRead, bytesFetched, bytesPerSecond: Int64
        /// Wall times (seconds since the epoch): its first open, its last close.
        var since: Double
        var ended: Double?
        var openHandles: Int
        /// The kernel read a handle of its itself: `bytesRead` is a floor.
        var kernelReads: Bool

        enum CodingKeys: String, CodingKey {
            case pid, process, arguments, parent, file, bytesRead, bytesFetched, bytesPerSecond, since, ended
            case openHandles, kernelReads
            case readClass = "class"
        }

        func encode(to encoder: Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(pid, forKey: .pid)
            try container.encode(process, forKey: .process)
            try container.encode(arguments, forKey: .arguments)
            try container.encode(parent, forKey: .parent)
            try container.encode(readClass, forKey: .readClass)
            try container.encode(file, forKey: .file)
            try container.encode(bytesRead, forKey: .bytesRead)
            try container.encode(bytesFetched, forKey: .bytesFetched)
            try container.encode(bytesPerSecond, forKey: .bytesPerSecond)
            try container.encode(since, forKey: .since)
            // null while it reads, so a reader of the JSON sees the key.
            try container.encode(ended, forKey: .ended)
            try container.encode(openHandles, forKey: .openHandles)
            try container.encode(kernelReads, forKey: .kernelReads)
        }
    }
}
