// The kernel's node id of a directory of the mount, which an entry
// invalidation names its parent by. libfuse's high-level API keeps its node
// table to itself, so the kernel is asked: the FUSE file handle of a path
// (name_to_handle_at) carries the node id (fs/fuse/inode.c fuse_encode_fh),
// with or without export support (decision 0051). Asking walks the path on
// the mount, which the FUSE threads may have to answer (a lookup): never
// from inside a request, and only while the loop serves (MediaFS).
import CSystem
import MediaStore
import MediaSupport
#if canImport(Glibc)
import Glibc
#endif

enum KernelNode {
    /// The root's node id (FUSE_ROOT_ID): known without asking.
    static let rootID: UInt64 = 1

    /// fuse_encode_fh's handle types: without the parent (0x81, three
    /// 32-bit words) and with it (0x82, six); the first two words are the
    /// node id, high half first.
    static let handleTypes: Set<Int32> = [0x81, 0x82]

    /// The node id a FUSE file handle carries; nil for a handle of another
    /// kind or too short.
    static func nodeID(handleType: Int32, bytes: [UInt8]) -> UInt64? {
        guard handleTypes.contains(handleType), bytes.count >= 12 else { return nil }
        // The words are the kernel's u32s, in its (this host's) byte order.
        func word(_ index: Int) -> UInt64 {
            var value: UInt32 = 0
            withUnsafeMutableBytes(of: &value) { $0.copyBytes(from: bytes[(index * 4)..<(index * 4 + 4)]) }
            return UInt64(value)
        }
        return word(0) << 32 | word(1)
    }

    /// The node id of the mount's directory at `path` (relative to the
    /// mount, "" for the root) under `mountpoint`. ENOENT: no such name
    /// now (a removed directory, a mount gone).
    static func id(of path: String, under mountpoint: String) -> Result<UInt64, MediaError> {
        if path.split(separator: "/").isEmpty { return .success(rootID) }
        let full = (mountpoint.hasSuffix("/") ? String(mountpoint.dropLast()) : mountpoint)
            + (path.hasPrefix("/") ? path : "/" + path)
        var bytes = [UInt8](repeating: 0, count: 128)
        var size = UInt32(bytes.count)
        var type: Int32 = 0
        let status = FileIO.retryingEINTR { mediafs_name_to_handle(full, &bytes, &size, &type) }
        guard status == 0 else { return .failure(MediaError.system("no file handle of \(path)")) }
        guard let id = nodeID(handleType: type, bytes: Array(bytes.prefix(Int(size)))) else {
            return .failure(MediaError(EOPNOTSUPP, "the handle of \(path) is of type \(type), not FUSE's"))
        }
        return .success(id)
    }
}
