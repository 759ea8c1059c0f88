// Reading and writing `user.mediafs.*` on a path: how the admin commands
// talk to a running mount, so they work on any mediafs mount.
import CSystem
import MediaCache
import MediaSupport
#if canImport(Glibc)
import Glibc
#endif

enum Xattr {
    static func get(_ path: String, _ key: String) throws -> String {
        let name = AdminAttributes.prefix + key
        let size = getxattr(path, name, nil, 0)
        guard size >= 0 else { throw failure(path, name) }
        var buffer = [UInt8](repeating: 0, count: size + 1)
        let read = getxattr(path, name, &buffer, buffer.count)
        guard read >= 0 else { throw failure(path, name) }
        return String(decoding: buffer[..<read], as: UTF8.self)
    }

    static func set(_ path: String, _ key: String, _ value: String) throws {
        let name = AdminAttributes.prefix + key
        let bytes = Array(value.utf8)
        guard setxattr(path, name, bytes, bytes.count, 0) == 0 else { throw failure(path, name) }
    }

    /// Says "not in a mediafs mount" where that is what the errno means.
    private static func failure(_ path: String, _ name: String) -> MediaError {
        let code = errno
        switch code {
        case ENODATA, ENOTSUP:
            return MediaError(code, "\(path) is not in a mediafs mount (no attribute \(name))")
        default:
            return MediaError.system("\(path): \(name)", errno: code)
        }
    }

    /// Fails with a clear message unless `path` is a mediafs mount's root.
    static func requireMount(_ path: String) throws {
        _ = try get(path, "stats")
    }

    /// Writes an admin attribute, but only on a mediafs file or mount root:
    /// on any other file system the write would succeed and mean nothing.
    static func command(_ path: String, _ key: String, _ value: String) throws {
        guard (try? get(path, "url")) != nil || (try? get(path, "stats")) != nil else {
            throw MediaError(EINVAL, "\(path) is not in a mediafs mount")
        }
        try set(path, key, value)
    }
}
