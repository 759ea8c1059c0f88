// A write lease (fcntl F_SETLEASE) held on a file while a test runs: an
// open of it with O_NONBLOCK, as the store opens metadata, fails with
// EAGAIN, while its directory still lists and the file still stats. A
// file that cannot be opened for a moment, then, which tests running as
// root get no other way (mode 000 does not stop root, and a descriptor
// limit stops the directory listing before the file).
import Foundation
import MediaNetwork
import MediaSupport
#if canImport(Glibc)
import Glibc
#endif

enum FileLease {
    /// Linux's F_SETLEASE, which <fcntl.h> declares only under _GNU_SOURCE.
    private static let setLease: Int32 = 1024

    /// Runs `body` while `path` is leased. An open that breaks the lease
    /// sends its holder SIGIO, whose default ends the process: ignored
    /// meanwhile.
    static func holding<T>(_ path: String, _ body: () throws -> T) throws -> T {
        let previous = signal(SIGIO, SIG_IGN)
        defer { signal(SIGIO, previous) }
        let fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw MediaError.system("cannot open \(path)") }
        defer { close(fd) }
        guard fcntl(fd, setLease, Int32(F_WRLCK)) == 0 else { throw MediaError.system("cannot lease \(path)") }
        defer { _ = fcntl(fd, setLease, Int32(F_UNLCK)) }
        return try body()
    }
}
