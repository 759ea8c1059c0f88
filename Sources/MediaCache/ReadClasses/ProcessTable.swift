// What the classifier needs to know of a process, read from /proc: the
// process a thread belongs to, its name (`comm`, what the kernel keeps of
// its executable's name, 15 bytes at most), its parent and its start time
// (field 22 of /proc/PID/stat, in clock ticks since boot: a reused pid has
// another), and its arguments (a thumbnail's ffmpeg asks for one frame). A seam, so tests give a fake table. Every number read is
// bounded and parsed with checked arithmetic; anything unexpected is nil.
#if canImport(Glibc)
import Glibc
#endif

public struct ProcessStat: Sendable, Equatable {
    public var parent: Int32
    public var startTime: UInt64

    public init(parent: Int32, startTime: UInt64) {
        self.parent = parent
        self.startTime = startTime
    }
}

public protocol ProcessTable: Sendable {
    /// The process (thread group) of thread `id`: FUSE names the calling thread.
    func process(ofThread id: Int32) -> Int32?
    /// Its `comm`, without the newline.
    func name(of pid: Int32) -> String?
    func stat(of pid: Int32) -> ProcessStat?
    /// Its command line's arguments (/proc/PID/cmdline), at most the first
    /// `ProcFileSystem.argumentsLimit` bytes of them; nil when unreadable.
    func arguments(of pid: Int32) -> [String]?
}

extension ProcessTable {
    public func arguments(of pid: Int32) -> [String]? { nil }
}

/// The live table: /proc of this machine.
public struct ProcFileSystem: ProcessTable {
    /// /proc/PID/stat and status are a few hundred bytes; more is not a
    /// file we understand.
    static let readLimit = 4096
    /// A command line is read this far: the options that tell a thumbnail
    /// come before its output, and a longer one is cut, never refused.
    static let argumentsLimit = 16384

    public init() {}

    public func process(ofThread id: Int32) -> Int32? {
        guard let text = Self.read("/proc/\(id)/status") else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("Tgid:") {
            return Self.pid(line.dropFirst(5).trimmingSpaces)
        }
        return nil
    }

    public func name(of pid: Int32) -> String? {
        guard let text = Self.read("/proc/\(pid)/comm") else { return nil }
        return text.hasSuffix("\n") ? String(text.dropLast()) : text
    }

    public func arguments(of pid: Int32) -> [String]? {
        guard let bytes = Self.readBytes("/proc/\(pid)/cmdline", limit: Self.argumentsLimit, whole: false) else {
            return nil
        }
        return bytes.split(separator: 0, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
    }

    public func stat(of pid: Int32) -> ProcessStat? {
        guard let text = Self.read("/proc/\(pid)/stat") else { return nil }
        return Self.parseStat(text)
    }

    /// `pid (comm) state ppid …`: the name may hold spaces and parentheses,
    /// so fields are counted from the last ')'. Field 4 is the parent,
    /// field 22 the start time.
    static func parseStat(_ text: String) -> ProcessStat? {
        guard let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ", omittingEmptySubsequences: true)
        // fields[0] is field 3 (state).
        guard fields.count >= 20, let parent = pid(Substring(fields[1])),
              let start = UInt64(fields[19]) else { return nil }
        return ProcessStat(parent: parent, startTime: start)
    }

    /// A pid: 0 (no parent) up to the kernel's most (2^22).
    static func pid(_ text: Substring) -> Int32? {
        guard text.count <= 8, let value = Int32(text), (0...(1 << 22)).contains(value) else { return nil }
        return value
    }

    private static func read(_ path: String) -> String? {
        readBytes(path, limit: readLimit, whole: true).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Up to `limit` bytes of a file; with `whole`, nil for a longer one.
    private static func readBytes(_ path: String, limit: Int, whole: Bool) -> ArraySlice<UInt8>? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: limit)
        var filled = 0
        while filled < buffer.count {
            let count = buffer.withUnsafeMutableBytes { raw in
                Glibc.read(fd, raw.baseAddress! + filled, raw.count - filled)
            }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            filled += count
        }
        guard !whole || filled < buffer.count else { return nil }
        return buffer[..<filled]
    }
}

extension Substring {
    var trimmingSpaces: Substring {
        var text = self
        while let first = text.first, first == " " || first == "\t" { text = text.dropFirst() }
        while let last = text.last, last == " " || last == "\t" { text = text.dropLast() }
        return text
    }
}
