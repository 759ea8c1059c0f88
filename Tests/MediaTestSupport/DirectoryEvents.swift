// What happens in a directory, in the order the kernel saw it (inotify): a
// file renamed into place, a file's bytes changed (a write, a punched hole,
// a truncation). How a test observes the order of two steps without a hook
// in the code under test: "the metadata was renamed into place before the
// data file was punched".
import Foundation
import MediaNetwork
import MediaSupport
#if canImport(Glibc)
import Glibc
#endif

final class DirectoryEvents {
    enum Event: Equatable {
        /// A file renamed to this name (an atomic replace lands here).
        case renamedInto(String)
        /// The file's bytes or length changed: a write, fallocate, truncate.
        case modified(String)
    }

    private let fd: Int32

    /// Starts watching `directory`; events before this are not seen.
    init(_ directory: String) throws {
        fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { throw MediaError.system("inotify_init1") }
        guard inotify_add_watch(fd, directory, UInt32(IN_MOVED_TO | IN_MODIFY)) >= 0 else {
            close(fd)
            throw MediaError.system("inotify_add_watch \(directory)")
        }
    }

    deinit { close(fd) }

    /// Every event since the last call, oldest first. The kernel queues
    /// them before the syscall that caused them returns, so after that
    /// call they are all here.
    func take() -> [Event] {
        var events: [Event] = []
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { return events }
            var offset = 0
            let header = MemoryLayout<inotify_event>.size
            while offset + header <= n {
                let (mask, length) = buffer.withUnsafeBytes { raw -> (UInt32, Int) in
                    let event = raw.loadUnaligned(fromByteOffset: offset, as: inotify_event.self)
                    return (event.mask, Int(event.len))
                }
                let nameBytes = buffer[(offset + header)..<(offset + header + length)].prefix { $0 != 0 }
                let name = String(decoding: nameBytes, as: UTF8.self)
                if mask & UInt32(IN_MOVED_TO) != 0 { events.append(.renamedInto(name)) }
                if mask & UInt32(IN_MODIFY) != 0 { events.append(.modified(name)) }
                offset += header + length
            }
        }
    }
}
