// `mediafs mount`: reads the arguments, refuses bad input before anything is
// mounted, then hands over to the FUSE adapter.
import MediaCache
import MediaFS
#if canImport(Glibc)
import Glibc
#endif

struct MountCommand {
    var sources: [String] = []
    var mountpoint = ""
    var cacheDir: String?
    var foreground = false
    var debug = false
    var fuseOptions: [String] = []
    var timeout: Double = 30
    var preloadNext: Catalog.PreloadNext?

    static let usage = """
        usage: mediafs mount [OPTIONS] SOURCE... MOUNTPOINT
               mediafs status MOUNTPOINT [--json] [--watch]
               mediafs purge PATH...
               mediafs preload [--bytes N] PATH...

        SOURCE is an http(s) URL or a list file (one URL per line, '#' comments,
        'NAME<TAB>URL' to choose a name). Each URL becomes a read-only file.

        options:
          -f, --foreground     stay in the foreground, log to stderr
          --cache-dir DIR      cache directory (default $XDG_CACHE_HOME/mediafs,
                               else ~/.cache/mediafs)
          -o OPT[,OPT...]      FUSE mount options, e.g. allow_other
          --timeout SECONDS    how long a read waits for missing bytes (default 30)
          --preload-next N[:SIZE]  on open, preload SIZE (default 4M) leading
                               bytes of the next N files
          -d, --debug          log every request
          -h, --help           show this help
          -V, --version        show the version
        """

    init(arguments: [String]) throws {
        var positional: [String] = []
        var rest = arguments[...]
        func value(_ option: String) throws -> String {
            guard let next = rest.popFirst() else { throw UsageError("\(option) needs a value") }
            return next
        }
        while let argument = rest.popFirst() {
            var option = argument
            var inline: String?
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                option = String(argument[..<equals])
                inline = String(argument[argument.index(after: equals)...])
            }
            switch option {
            case "-f", "--foreground": foreground = true
            case "-d", "--debug": debug = true
            case "--cache-dir": cacheDir = try inline ?? value(option)
            case "-o":
                for key in try value(option).split(separator: ",") { try mountOption(String(key)) }
            case "--timeout": try setTimeout(inline ?? value(option))
            case "--preload-next": try setPreloadNext(inline ?? value(option))
            case "--": positional += rest; rest = []
            default:
                if option.hasPrefix("-") && option.count > 1 { throw UsageError("unknown option '\(argument)'") }
                positional.append(argument)
            }
        }
        guard positional.count >= 2 else {
            throw UsageError(positional.isEmpty ? "missing SOURCE and MOUNTPOINT" : "missing MOUNTPOINT")
        }
        mountpoint = positional.removeLast()
        sources = positional
    }

    /// An `-o` key: mediafs's own options as fstab writes them
    /// (`cache_dir=DIR`), mount(8)'s bookkeeping dropped, the rest for FUSE.
    private mutating func mountOption(_ key: String) throws {
        let parts = key.split(separator: "=", maxSplits: 1).map(String.init)
        let value = parts.count > 1 ? parts[1] : nil
        switch parts[0] {
        case "cache_dir", "cache-dir":
            guard let value else { throw UsageError("-o cache_dir needs a value") }
            cacheDir = value
        case "timeout":
            try setTimeout(value ?? "")
        case "preload_next", "preload-next":
            try setPreloadNext(value ?? "")
        case "debug":
            debug = true
        case "foreground":
            foreground = true
        case "rw", "defaults", "auto", "noauto", "nofail", "_netdev", "user", "users", "nouser", "dev", "suid", "exec":
            break
        default:
            if parts[0].hasPrefix("x-") || parts[0].hasPrefix("comment=") { break }
            fuseOptions.append(key)
        }
    }

    private mutating func setTimeout(_ text: String) throws {
        guard let seconds = Units.seconds(text), seconds > 0 else {
            throw UsageError("--timeout needs a positive duration such as 30 or 2m, not '\(text)'")
        }
        timeout = seconds
    }

    private mutating func setPreloadNext(_ text: String) throws {
        let parts = text.split(separator: ":", maxSplits: 1).map(String.init)
        guard let count = Int(parts.first ?? ""), count >= 0 else {
            throw UsageError("--preload-next needs N or N:SIZE such as 2:8M, not '\(text)'")
        }
        var bytes = Catalog.PreloadNext.defaultBytes
        if parts.count > 1 {
            guard let size = Units.bytes(parts[1]) else {
                throw UsageError("--preload-next size '\(parts[1])' is not a byte count such as 8M")
            }
            bytes = size
        }
        preloadNext = count > 0 ? Catalog.PreloadNext(count: count, bytes: bytes) : nil
    }

    static func defaultCacheDir() -> String {
        if let xdg = getenv("XDG_CACHE_HOME"), xdg.pointee != 0 { return String(cString: xdg) + "/mediafs" }
        let home = getenv("HOME").map { String(cString: $0) } ?? "/root"
        return home + "/.cache/mediafs"
    }

    /// Absolute, because the daemon changes to `/` when it detaches.
    static func absolute(_ path: String) -> String {
        if path.hasPrefix("/") { return path }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX))
        guard getcwd(&buffer, buffer.count) != nil else { return path }
        return String(cString: buffer) + "/" + path
    }

    func run() throws {
        Log.configure(level: debug ? .debug : .info, sink: .stderr)
        let parsed = try Source.parse(arguments: sources)
        try MediaFS.checkMountpoint(mountpoint)
        let store = try CacheStore(root: Self.absolute(cacheDir ?? Self.defaultCacheDir()))
        var settings = LoaderSettings()
        settings.timeout = timeout
        var options = MediaFS.Options(mountpoint: Self.absolute(mountpoint))
        options.foreground = foreground
        options.fuseOptions = fuseOptions
        let preloadNext = self.preloadNext
        let fs = MediaFS(options: options) {
            Catalog(sources: parsed, store: store, fetcher: CurlFetcher(), settings: settings, preloadNext: preloadNext)
        }
        try fs.run()
    }
}

struct UsageError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
