// `mediafs purge`, `preload`, `pin`, `unpin`, `add` and `remove`: thin
// wrappers over the writable xattrs, so scripts need not know attribute
// names, and a refusal says who may administer the mount.
import MediaCache
import MediaSupport
#if canImport(Glibc)
import Glibc
#endif

enum AdminCommands {
    static let purgeUsage = "usage: mediafs purge PATH..."
    static let pinUsage = "usage: mediafs pin|unpin PATH..."
    static let addUsage = "usage: mediafs add URL... --to MOUNTPOINT"
    static let removeUsage = "usage: mediafs remove NAME... --from MOUNTPOINT"

    /// `mediafs add URL... --to MOUNTPOINT` and `remove NAME... --from
    /// MOUNTPOINT`: the root's `add` and `remove` attributes.
    static func change(_ arguments: [String], key: String, flag: String, usage: String) throws {
        var values: [String] = []
        var mountpoint: String?
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            if argument == flag {
                guard let value = rest.popFirst() else { throw UsageError(usage) }
                mountpoint = value
            } else if argument.hasPrefix("-") {
                throw UsageError("unknown option '\(argument)'\n\(usage)")
            } else {
                values.append(argument)
            }
        }
        guard let mountpoint, !values.isEmpty else { throw UsageError(usage) }
        try administering(mountpoint, "\(key) \(flag.dropFirst(2))") {
            try Xattr.requireMount(mountpoint)
            for value in values {
                do {
                    try Xattr.set(mountpoint, key, value)
                } catch let error as MediaError where key == "remove" && error.errno == EROFS {
                    throw MediaError(EROFS, "remove '\(value)': it is listed by the mount's source, not added: "
                                     + "only names added with 'mediafs add' can be removed")
                } catch let error as MediaError where error.errno != EACCES && error.errno != EPERM {
                    throw MediaError(error.errno, "\(key) '\(value)': \(String(cString: strerror(error.errno)))")
                }
            }
        }
    }

    /// Runs one command on `path`, turning the kernel's or the mount's
    /// refusal into a message that names who may: the mount's owner and root.
    private static func administering(_ path: String, _ verb: String, _ body: () throws -> Void) throws {
        var info = stat()
        // Without allow_other, no one but the owner can even look at the mount.
        let owner: uid_t? = stat(path, &info) == 0 ? info.st_uid : nil
        if owner == nil && errno == EACCES { throw denied(path, verb, owner: nil) }
        do {
            try body()
        } catch let error as MediaError where error.errno == EACCES || error.errno == EPERM {
            throw MediaError(error.errno, denied(path, verb, owner: owner).message)
        }
    }

    private static func denied(_ path: String, _ verb: String, owner: uid_t?) -> MediaError {
        let you = "you are \(userName(geteuid()))"
        guard let owner else {
            return MediaError(EACCES, "cannot \(verb) \(path): permission denied: a mount made without "
                              + "-o allow_other is reachable by its owner only; \(you)")
        }
        return MediaError(EACCES, "cannot \(verb) \(path): permission denied: a mediafs mount is administered by "
                          + "its owner (\(userName(owner))) and root only; \(you)")
    }

    private static func userName(_ uid: uid_t) -> String {
        guard let entry = getpwuid(uid) else { return "uid \(uid)" }
        return "\(String(cString: entry.pointee.pw_name)), uid \(uid)"
    }
    static let preloadUsage = "usage: mediafs preload [--bytes N] PATH..."

    static func purge(_ arguments: [String]) throws {
        guard !arguments.isEmpty, !arguments.contains(where: { $0.hasPrefix("-") }) else {
            throw UsageError(purgeUsage)
        }
        for path in arguments {
            try administering(path, "purge") { try Xattr.command(path, "purge", "1") }
        }
    }

    /// `mediafs pin PATH...` (`on`) and `mediafs unpin PATH...`.
    static func pin(_ arguments: [String], on: Bool) throws {
        guard !arguments.isEmpty, !arguments.contains(where: { $0.hasPrefix("-") }) else {
            throw UsageError(pinUsage)
        }
        for path in arguments { try Xattr.command(path, "pin", on ? "1" : "0") }
    }

    static func preload(_ arguments: [String]) throws {
        var value = "1"
        var paths: [String] = []
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            if argument == "--bytes" {
                guard let text = rest.popFirst(), Units.bytes(text) != nil else {
                    throw UsageError("--bytes needs a byte count such as 4M\n\(preloadUsage)")
                }
                value = text
            } else if argument.hasPrefix("-") {
                throw UsageError("unknown option '\(argument)'\n\(preloadUsage)")
            } else {
                paths.append(argument)
            }
        }
        guard !paths.isEmpty else { throw UsageError(preloadUsage) }
        for path in paths {
            try administering(path, "preload") { try Xattr.command(path, "preload", value) }
        }
    }
}
