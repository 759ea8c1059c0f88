// The options that say where the cache is and how big and old it may get,
// shared by `mediafs mount` and `mediafs cache`.
import MediaCache
import MediaSupport
#if canImport(Glibc)
import Glibc
#endif

struct CacheOptions {
    var directory: String?
    var limits = CacheLimits()

    static let help = """
          --cache-dir DIR      cache directory (default $XDG_CACHE_HOME/mediafs,
                               else ~/.cache/mediafs)
          --cache-max-size SIZE        total size of the cache (default 10G)
          --scan-cache-size SIZE       of it, what files only library scans
                                       read may take, evicted first (default
                                       an eighth of --cache-max-size)
          --cache-min-free SIZE        free space to leave on its disk (default 1G)
          --cache-max-age DURATION     drop partial entries unread this long (default 7d)
          --cache-max-age-complete DURATION  drop complete entries unread this long (default 30d)
        """

    /// Takes one of its options; returns false for any other.
    mutating func take(_ option: String, value: () throws -> String) throws -> Bool {
        switch option {
        case "--cache-dir": directory = try value()
        case "--cache-max-size": limits.maxSize = try Self.size(option, value())
        case "--scan-cache-size": limits.scanMaxSize = try Self.size(option, value())
        case "--cache-min-free": limits.minFree = try Self.size(option, value())
        case "--cache-max-age": limits.maxAgePartial = try Self.duration(option, value())
        case "--cache-max-age-complete": limits.maxAgeComplete = try Self.duration(option, value())
        default: return false
        }
        return true
    }

    static func size(_ option: String, _ text: String) throws -> Int64 {
        guard let bytes = Units.bytes(text) else {
            throw UsageError("\(option) needs a size such as 512M or 10G, not '\(text)'")
        }
        return bytes
    }

    static func duration(_ option: String, _ text: String) throws -> Double {
        guard let seconds = Units.seconds(text) else {
            throw UsageError("\(option) needs a duration such as 90s, 30m, 12h or 7d, not '\(text)'")
        }
        return seconds
    }

    /// Absolute, because the daemon changes to `/` when it detaches.
    var resolvedDirectory: String {
        let path = directory ?? Self.defaultDirectory()
        if path.hasPrefix("/") { return path }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX))
        guard getcwd(&buffer, buffer.count) != nil else { return path }
        return buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) } + "/" + path
    }

    static func defaultDirectory() -> String {
        if let xdg = getenv("XDG_CACHE_HOME"), xdg.pointee != 0 { return String(cString: xdg) + "/mediafs" }
        let home = getenv("HOME").map { String(cString: $0) } ?? "/root"
        return home + "/.cache/mediafs"
    }
}
