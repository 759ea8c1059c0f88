// One cache, one user: an exclusive flock on `<cache>/lock`, held by a mount
// (or a `cache gc|clear`) for its whole life and released by the kernel when
// the holder exits. The file's text, the holder's pid, is only for messages.
import Foundation
#if canImport(Glibc)
import Glibc
import MediaSupport
#endif

public final class CacheLock: Sendable {
    /// How long a new user waits for a departing one: an unmounted daemon
    /// still persists its metadata before it exits.
    public static let departureWait = 10.0
    private static let pollInterval: useconds_t = 50_000

    public let directory: String
    public let path: String
    /// Never closed before the process ends except by deinit: closing any
    /// descriptor of this open file would not drop the lock, but closing the
    /// last one does. O_CLOEXEC: a helper the process runs (fusermount3) must
    /// not keep the cache locked. The daemon is a process of its own
    /// (DaemonStart spawns it; nothing forks), and takes the lock itself.
    private let fd: Int32

    /// Takes the lock, polling up to `wait` seconds while another process
    /// holds it. Throws EBUSY naming the directory and, when it can be read,
    /// the holder's pid.
    public init(directory: String, wait: Double, clock: Clock) throws {
        self.directory = directory
        path = directory + "/lock"
        var fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw MediaError.system("cannot open the cache lock \(path)")
        }
        // The daemon points 0, 1 and 2 at /dev/null once mounted (DaemonStart):
        // a lock opened there (by a process started with one of them closed)
        // would be dropped.
        if fd <= 2 {
            let moved = fcntl(fd, F_DUPFD_CLOEXEC, 3)
            let code = errno
            close(fd)
            guard moved >= 0 else { throw MediaError.system("cannot move the cache lock \(path)", errno: code) }
            fd = moved
        }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else {
            close(fd)
            throw MediaError(EINVAL, "the cache lock \(path) is not a regular file")
        }
        let deadline = Deadline.after(seconds: min(max(wait, 0), 3600), clock: clock)
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            if code == EINTR { continue }
            guard code == EWOULDBLOCK, !deadline.hasPassed else {
                let holder = Self.holder(fd)
                close(fd)
                guard code == EWOULDBLOCK else { throw MediaError.system("cannot lock \(path)", errno: code) }
                let who = holder.map { "process \($0)" } ?? "another process"
                throw MediaError(EBUSY, "cache directory \(directory) is in use by \(who) (a mount or a cache command)")
            }
            usleep(Self.pollInterval)
        }
        self.fd = fd
        recordHolder()
    }

    deinit {
        close(fd)
    }

    /// Writes this process's pid into the lock file.
    private func recordHolder() {
        let text = Array("\(getpid())\n".utf8)
        guard (try? FileIO.truncate(fd: fd, to: 0)) != nil else { return }
        try? FileIO.writeFully(fd: fd, from: text, at: 0)
    }

    /// The pid written by the holder, or nil when the file holds no
    /// plausible one (a holder between open and write, or garbage).
    private static func holder(_ fd: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 16)
        guard let n = buffer.withUnsafeMutableBytes({ try? FileIO.readFully(fd: fd, into: $0, at: 0) }), n > 0 else {
            return nil
        }
        let text = String(decoding: buffer[..<n], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard text.count <= 10, text.allSatisfy(\.isASCII), let pid = Int32(text), pid > 0 else { return nil }
        return pid
    }
}
