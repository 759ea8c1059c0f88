// This process's arguments, and what every other user sees of them. A
// password given in a URL (`https://user:pass@host/…`, `dav://…`, a
// `--proxy`) would stay readable by anyone in `ps` and /proc/PID/cmdline
// for the mount's whole life. So each mediafs process masks the passwords
// in its own argv memory as it starts (the kernel shows that memory, and a
// process may overwrite it, as database daemons do with theirs), and the
// daemon is spawned with the masked arguments and reads the real ones from
// a pipe its command writes (DaemonStart), so they are never on its
// command line at all.
#if canImport(Glibc)
import Glibc
#endif
import Foundation

enum ProgramArguments {
    /// Set in the daemon's environment: the descriptor its real arguments
    /// come on, each ended by a NUL.
    static let pipeVariable = "MEDIAFS_DAEMON_ARGUMENTS_FD"
    /// At most this many bytes of arguments are read from the pipe.
    static let maxPipeBytes = 16 << 20

    /// The arguments after the program's name, real: the pipe's in a
    /// daemon started with one, else the command line's as given.
    static let all: [String] = fromPipe() ?? Array(CommandLine.arguments.dropFirst())

    /// `argument` with each URL's password replaced by as many `*`; nil
    /// when it holds none.
    static func masked(_ argument: String) -> String? {
        var bytes = Array(argument.utf8)
        var changed = false
        var searchFrom = 0
        while let scheme = bytes[searchFrom...].firstRange(of: Array("://".utf8)) {
            let start = scheme.upperBound
            var end = start
            while end < bytes.count, ![UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "#"),
                                        UInt8(ascii: " ")].contains(bytes[end]) {
                end += 1
            }
            if let at = bytes[start..<end].lastIndex(of: UInt8(ascii: "@")),
               let colon = bytes[start..<at].firstIndex(of: UInt8(ascii: ":")), colon + 1 < at {
                for i in (colon + 1)..<at { bytes[i] = UInt8(ascii: "*") }
                changed = true
            }
            searchFrom = max(end, start)
        }
        return changed ? String(decoding: bytes, as: UTF8.self) : nil
    }

    /// Every argument as `ps` may show it.
    static func shown(_ arguments: [String]) -> [String] {
        arguments.map { masked($0) ?? $0 }
    }

    /// Overwrites the passwords in this process's own argv memory (the
    /// same length, so the command line keeps its shape).
    static func maskOwnCommandLine() {
        let argv = CommandLine.unsafeArgv
        for index in 1..<Int(CommandLine.argc) {
            guard let pointer = argv[index] else { continue }
            let text = String(cString: pointer)
            guard let masked = masked(text), masked.utf8.count == text.utf8.count else { continue }
            for (offset, byte) in masked.utf8.enumerated() { pointer[offset] = CChar(bitPattern: byte) }
        }
    }

    /// In a daemon given the pipe: its arguments, the variable taken out of
    /// the environment (nothing it starts inherits it); nil otherwise.
    private static func fromPipe() -> [String]? {
        guard let text = getenv(pipeVariable).map({ String(cString: $0) }) else { return nil }
        unsetenv(pipeVariable)
        // Started to read them and cannot: the masked ones would not do.
        func refuse(_ why: String) -> Never {
            FileHandle.standardError.write(Data("mediafs: \(pipeVariable)=\(text): \(why)\n".utf8))
            exit(1)
        }
        guard let fd = Int32(text), fd > 2, fcntl(fd, F_GETFD) >= 0 else { refuse("not an open descriptor") }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        while bytes.count <= maxPipeBytes {
            let count = read(fd, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            bytes += buffer[..<count]
        }
        guard bytes.count <= maxPipeBytes, bytes.last == 0 || bytes.isEmpty else {
            refuse("the arguments are cut short or longer than \(maxPipeBytes) bytes")
        }
        return bytes.split(separator: 0, omittingEmptySubsequences: false).dropLast().map {
            String(decoding: $0, as: UTF8.self)
        }
    }
}
