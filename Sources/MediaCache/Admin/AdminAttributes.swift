// The `user.mediafs.*` extended attributes: what each name reads and what a
// write to it does. The FUSE adapter only moves bytes and errnos; every
// decision about administration is made here.
#if canImport(Glibc)
import Glibc
import MediaSupport
#endif

public enum AdminAttributes {
    public static let prefix = "user.mediafs."

    public static let fileReadable = ["url", "content_type", "etag", "last_modified", "size",
                                      "cached_bytes", "cached_ranges", "complete", "state"]
    public static let fileWritable = ["purge", "preload", "pin"]
    public static let rootReadable = ["stats", "sources", "readers"]
    public static let rootWritable = ["purge", "add", "remove"]
    /// On a listed directory, the root too when a directory source is it.
    public static let directoryWritable = ["refresh"]

    /// What the adapter must do after a write.
    public enum Effect: Equatable, Sendable {
        case none
        /// Cached bytes are gone: the kernel must drop its pages of these
        /// URLs' files, under every name.
        case invalidate(urls: [String])
    }

    public static func list(root: Bool) -> [String] {
        (root ? rootReadable + rootWritable : fileReadable + fileWritable).map { prefix + $0 }
    }

    /// The root's names, with a listed directory's when it is one.
    public static func listRoot(of catalog: Catalog) -> [String] {
        list(root: true) + (catalog.rootListingURL == nil ? [] : listDirectory())
    }

    public static func listDirectory() -> [String] {
        directoryWritable.map { prefix + $0 }
    }

    /// Names outside the user namespace (security.selinux, the POSIX ACLs)
    /// get ENOTSUP: this file system keeps none, and that answer lets
    /// `ls -l` stop asking for them on the rest of the mount, where
    /// ENODATA costs two round trips per file.
    private static func key(_ name: String) throws -> String {
        guard name.hasPrefix("user.") else { throw MediaError(ENOTSUP, "no \(name): only user.* attributes are kept") }
        guard name.hasPrefix(prefix) else { throw MediaError(ENODATA, "no attribute \(name)") }
        return String(name.dropFirst(prefix.count))
    }

    /// A write of any other name is refused as a file system without
    /// arbitrary xattrs refuses it, not with "no data".
    private static func writableKey(_ name: String) throws -> String {
        guard name.hasPrefix(prefix) else { throw MediaError(ENOTSUP, "no writable attribute \(name)") }
        return String(name.dropFirst(prefix.count))
    }

    /// Reads a file's attribute; ENODATA for names it does not have.
    public static func read(_ name: String, of loader: FileLoader) throws -> String {
        let status = loader.status()
        let info = status.info
        switch try key(name) {
        case "url": return MediaError.redacted(status.url)
        case "content_type": return info?.contentType ?? ""
        case "etag": return info?.etag ?? ""
        case "last_modified": return info?.lastModified ?? ""
        case "size": return info.map { String($0.length) } ?? ""
        case "cached_bytes": return String(status.cachedBytes)
        case "cached_ranges": return status.present.description
        case "complete": return status.isComplete ? "1" : "0"
        case "state": return status.stateText
        case "pin": return status.pinned ? "1" : "0"
        // Write-only, but listed: reading them gives an empty value so that
        // `getfattr -d` shows every attribute without an error.
        case "purge", "preload": return ""
        default: throw MediaError(ENODATA, "no attribute \(name)")
        }
    }

    public static func readRoot(_ name: String, of catalog: Catalog) throws -> String {
        switch try key(name) {
        case "stats": return catalog.statsJSON()
        case "sources": return catalog.sourcesJSON()
        case "readers": return catalog.readersJSON()
        case "purge", "add", "remove": return ""
        case "refresh" where catalog.rootListingURL != nil: return ""
        default: throw MediaError(ENODATA, "no attribute \(name)")
        }
    }

    /// Writes a file's attribute: `purge` (any value) or `preload` (`1`:
    /// the whole file, `0`: stop, or a byte count such as `4M`).
    public static func write(_ name: String, value: String, to loader: FileLoader, at path: String) throws -> Effect {
        switch try writableKey(name) {
        case "purge":
            loader.purge()
            return .invalidate(urls: [loader.source.url])
        case "preload":
            let trimmed = value.trimmingSpaces
            let limit: Int64?
            if trimmed == "1" {
                limit = nil
            } else if let bytes = Units.bytes(String(trimmed)) {
                limit = bytes
            } else {
                throw MediaError(EINVAL, "preload takes 1 (whole file), 0 (stop) or a byte count, not '\(value)'")
            }
            try loader.preload(limit: limit)
            return .none
        case "pin":
            switch value.trimmingSpaces {
            case "1": loader.setPinned(true)
            case "0": loader.setPinned(false)
            default: throw MediaError(EINVAL, "pin takes 1 (keep the file's cached bytes) or 0, not '\(value)'")
            }
            return .none
        case let other where fileReadable.contains(other):
            throw MediaError(EPERM, "\(name) is read-only")
        default:
            throw MediaError(ENOTSUP, "no writable attribute \(name)")
        }
    }

    /// Reads a (non-root) directory's attribute: `refresh` is write-only,
    /// and reads empty so that `getfattr -d` lists it without an error.
    public static func readDirectory(_ name: String) throws -> String {
        guard directoryWritable.contains(try key(name)) else { throw MediaError(ENODATA, "no attribute \(name)") }
        return ""
    }

    /// Writes a directory's attribute: `refresh` (any value) lists it again
    /// now, and returns once the new listing is in place.
    public static func writeDirectory(_ name: String, value: String, to catalog: Catalog, at path: String) throws
        -> Effect {
        switch try key(name) {
        case "refresh":
            try catalog.refresh(path)
            return .none
        default:
            throw MediaError(ENOTSUP, "no writable attribute \(name) on a directory")
        }
    }

    public static func writeRoot(_ name: String, value: String, to catalog: Catalog) throws -> Effect {
        switch try writableKey(name) {
        case "purge":
            return .invalidate(urls: catalog.purgeAll())
        case "add":
            _ = try catalog.add(url: value)
            return .none
        case "remove":
            try catalog.remove(name: value)
            return .none
        case "refresh" where catalog.rootListingURL != nil:
            try catalog.refresh("/")
            return .none
        case "stats":
            throw MediaError(EPERM, "\(name) is read-only")
        default:
            throw MediaError(ENOTSUP, "no writable attribute \(name)")
        }
    }
}
