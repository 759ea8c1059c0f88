// What background jobs fetched today (`--background-daily`), kept in the
// cache directory (`<cache-dir>/background-use`) so a remount goes on
// counting: one line, `mediafs-background-use 1 DAY BYTES`, DAY the UTC
// day's number since the epoch. Written whole to a temporary file and
// renamed; read back bounded: anything else is no use yet.
import Foundation
import MediaSupport
#if canImport(Glibc)
import Glibc
#endif

extension CacheStore {
    private var backgroundUsePath: String { root + "/background-use" }
    private static let backgroundUseMagic = "mediafs-background-use 1"

    /// The day and bytes last saved; nil when none are, or the file is not one.
    package func loadBackgroundUse() -> (day: Int64, bytes: Int64)? {
        var st = stat()
        guard lstat(backgroundUsePath, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, st.st_size <= 256,
              let data = FileManager.default.contents(atPath: backgroundUsePath) else { return nil }
        let fields = String(decoding: data, as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\n" })
        guard fields.count == 4, fields[0...1].joined(separator: " ") == Self.backgroundUseMagic,
              fields[2].count <= 12, fields[3].count <= 19,
              let day = Int64(fields[2]), (0...10_000_000).contains(day),
              let bytes = Int64(fields[3]), Limits.isLength(bytes) else {
            Log.warning("\(backgroundUsePath) is not a count of background bytes: counting today from 0")
            return nil
        }
        return (day, bytes)
    }

    /// Keeps today's count, replacing the last one.
    package func saveBackgroundUse(day: Int64, bytes: Int64) throws {
        let path = backgroundUsePath
        let temp = path + ".tmp\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
        let text = Array("\(Self.backgroundUseMagic) \(day) \(bytes)\n".utf8)
        let fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw MediaError.system("create \(temp)") }
        let written = text.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        guard written == text.count, rename(temp, path) == 0 else {
            let error = MediaError.system("save \(path)")
            unlink(temp)
            throw error
        }
    }
}
