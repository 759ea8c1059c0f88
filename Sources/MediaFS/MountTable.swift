// Reads /proc/self/mountinfo, which says whether a path is a mountpoint
// without stat-ing it (a stat of our own mount before the loop runs would
// wait on ourselves).
#if canImport(Glibc)
import Glibc
#endif

enum MountTable {
    struct Entry {
        /// "major:minor", the name of the mount's bdi in /sys/class/bdi.
        var device: String
        var mountpoint: String
    }

    static func entries() -> [Entry] {
        guard let file = fopen("/proc/self/mountinfo", "r") else { return [] }
        defer { fclose(file) }
        var result: [Entry] = []
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        while getline(&line, &capacity, file) > 0 {
            if let entry = entry(fromLine: String(cString: line!)) { result.append(entry) }
        }
        return result
    }

    /// One line of mountinfo: "id parent major:minor root mountpoint ...".
    static func entry(fromLine line: String) -> Entry? {
        let fields = line.split(separator: " ")
        guard fields.count > 4 else { return nil }
        return Entry(device: String(fields[2]), mountpoint: unescape(fields[4]))
    }

    /// The newest mount at `path` (compared after resolving symlinks).
    static func entry(at path: String) -> Entry? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        let target = String(cString: resolved)
        return entries().last { $0.mountpoint == target }
    }

    /// Whether something is mounted at exactly `path` (resolved already):
    /// no stat, so a hung mount there cannot hang the caller.
    static func isMounted(at path: String) -> Bool {
        entries().contains { $0.mountpoint == path }
    }

    /// mountinfo writes space, tab, newline and backslash as octal escapes.
    static func unescape(_ field: Substring) -> String {
        var bytes: [UInt8] = []
        var utf8 = Array(field.utf8)[...]
        while let byte = utf8.popFirst() {
            if byte == UInt8(ascii: "\\"), utf8.count >= 3,
               let value = UInt8(String(decoding: utf8.prefix(3), as: UTF8.self), radix: 8) {
                bytes.append(value)
                utf8 = utf8.dropFirst(3)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
