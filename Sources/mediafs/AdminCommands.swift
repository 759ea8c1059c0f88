// `mediafs purge`, `preload`, `pin`, `unpin`, `add` and `remove`: thin
// wrappers over the writable xattrs, so scripts need not know attribute names.
import MediaCache
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
        try Xattr.requireMount(mountpoint)
        for value in values {
            do {
                try Xattr.set(mountpoint, key, value)
            } catch let error as MediaError {
                throw MediaError(error.errno, "\(key) '\(value)': \(String(cString: strerror(error.errno)))")
            }
        }
    }
    static let preloadUsage = "usage: mediafs preload [--bytes N] PATH..."

    static func purge(_ arguments: [String]) throws {
        guard !arguments.isEmpty, !arguments.contains(where: { $0.hasPrefix("-") }) else {
            throw UsageError(purgeUsage)
        }
        for path in arguments { try Xattr.command(path, "purge", "1") }
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
        for path in paths { try Xattr.command(path, "preload", value) }
    }
}
