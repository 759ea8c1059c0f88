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

    static let usage = """
        usage: mediafs mount [OPTIONS] SOURCE... MOUNTPOINT

        SOURCE is an http(s) URL or a list file (one URL per line, '#' comments,
        'NAME<TAB>URL' to choose a name). Each URL becomes a read-only file.

        options:
          -f, --foreground     stay in the foreground, log to stderr
          --cache-dir DIR      cache directory (default $XDG_CACHE_HOME/mediafs,
                               else ~/.cache/mediafs)
          -o OPT[,OPT...]      FUSE mount options, e.g. allow_other
          --timeout SECONDS    how long a read waits for missing bytes (default 30)
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
            case "-o": fuseOptions += try value(option).split(separator: ",").map(String.init)
            case "--timeout":
                let text = try inline ?? value(option)
                guard let seconds = Double(text), seconds > 0 else {
                    throw UsageError("--timeout needs a positive number of seconds, not '\(text)'")
                }
                timeout = seconds
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
        let fs = MediaFS(options: options) {
            Catalog(sources: parsed, store: store, fetcher: CurlFetcher(), settings: settings)
        }
        try fs.run()
    }
}

struct UsageError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
