// One cache, one user: an exclusive flock on `<cache>/lock`, held by a mount
// (or a `cache gc|clear`) for its whole life and released by the kernel when
// the holder exits. The file's text is the holder's pid and, while a mount
// serves, "serving <mountpoint>": a waiter refuses at once when that mount
// is still in the mount table, and waits only for a holder that may be on
// its way out (a departing daemon's last flush, a cache command).
import Foundation
#if canImport(Glibc)
import Glibc
import MediaSupport
#endif

package final class CacheLock: Sendable {
    /// How long a new user waits for a departing one: an unmounted daemon
    /// still persists its metadata before it exits.
    package static let departureWait = 10.0
    private static let pollInterval: useconds_t = 50_000

    package let directory: String
    package let path: String
    /// Never closed before the process ends except by deinit: closing any
    /// descriptor of this open file would not drop the lock, but closing the
    /// last one does. O_CLOEXEC: a helper the process runs (fusermount3) must
    /// not keep the cache locked. The daemon is a process of its own
    /// (DaemonStart spawns it; nothing forks), and takes the lock itself.
    private let fd: Int32

    /// What the lock file says of its holder.
    package struct Holder: Equatable, Sendable {
        package var pid: Int32?
        /// The mountpoint (resolved before mounting) of a mount that serves.
        package var serving: String?
    }

    /// Takes the lock, polling up to `wait` seconds while another process
    /// holds it, but not while the holder says it serves a mount that
    /// `isMounted` confirms: that one is not leaving. Throws EBUSY naming
    /// the directory and, when it can be read, the holder's pid.
    package init(directory: String, wait: Double, clock: Clock,
                isMounted: (String) -> Bool = { _ in false }) throws {
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
            let holder = code == EWOULDBLOCK ? Self.holder(fd) : Holder()
            let serving = holder.serving.flatMap { isMounted($0) ? $0 : nil }
            guard code == EWOULDBLOCK, !deadline.hasPassed, serving == nil else {
                close(fd)
                guard code == EWOULDBLOCK else { throw MediaError.system("cannot lock \(path)", errno: code) }
                let who = holder.pid.map { "process \($0)" } ?? "another process"
                let what = serving.map { "the mount at \($0)" } ?? "a mount or a cache command"
                throw MediaError(EBUSY, "cache directory \(directory) is in use by \(who) (\(what))")
            }
            usleep(Self.pollInterval)
        }
        self.fd = fd
        record(Holder(pid: getpid()))
    }

    deinit {
        close(fd)
    }

    /// Says the mount at `mountpoint` (resolved, as the mount table will
    /// show it) serves: a second mount or a cache command is refused at once.
    package func serving(at mountpoint: String) {
        record(Holder(pid: getpid(), serving: mountpoint))
    }

    /// Says the mount has ended: whoever waits now waits for this process
    /// to flush and exit.
    package func departing() {
        record(Holder(pid: getpid()))
    }

    /// The longest mountpoint the file records; a longer one is not
    /// recorded, and its waiters wait as for a departing holder.
    static let maxText = 4096

    private func record(_ holder: Holder) {
        var text = "\(holder.pid ?? 0)\n"
        if let mountpoint = holder.serving, !mountpoint.contains("\n"), mountpoint.utf8.count < Self.maxText - 32 {
            text += "serving \(mountpoint)\n"
        }
        // Longer first, then cut: a reader never sees a shorter record that
        // is a prefix of nothing written.
        guard (try? FileIO.writeFully(fd: fd, from: Array(text.utf8), at: 0)) != nil else { return }
        try? FileIO.truncate(fd: fd, to: Int64(text.utf8.count))
    }

    /// What the holder wrote; a pid of nil when the file holds no plausible
    /// one (a holder between open and write, or garbage).
    static func holder(_ fd: Int32) -> Holder {
        var buffer = [UInt8](repeating: 0, count: maxText)
        guard let n = buffer.withUnsafeMutableBytes({ try? FileIO.readFully(fd: fd, into: $0, at: 0) }), n > 0 else {
            return Holder()
        }
        return parse(String(decoding: buffer[..<n], as: UTF8.self))
    }

    static func parse(_ text: String) -> Holder {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        var holder = Holder()
        if let first = lines.first, first.count <= 10, first.allSatisfy(\.isASCII), let pid = Int32(first), pid > 0 {
            holder.pid = pid
        }
        // Only a whole line counts: a record cut by a concurrent write is no claim.
        if holder.pid != nil, lines.count >= 3, lines[1].hasPrefix("serving /") {
            holder.serving = String(lines[1].dropFirst("serving ".count))
        }
        return holder
    }
}
