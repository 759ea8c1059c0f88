// One open cache data file, shared by reference: readers and writers take a
// reference under the loader's lock and the descriptor is closed when the
// last of them lets go, so replacing the file never closes a descriptor a
// pread or pwrite is still using (or, worse, a reused number).
#if canImport(Glibc)
import Glibc
import MediaSupport
#endif

package final class DataFile: Sendable {
    package let fd: Int32

    package init(fd: Int32) {
        self.fd = fd
    }

    deinit {
        close(fd)
    }
}
