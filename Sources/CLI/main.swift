// mediafs: remote media as local, read-only files.
import MediaCache
import MediaSupport
#if canImport(Glibc)
import Glibc
#endif

func fail(_ message: String, status: Int32) -> Never {
    var text = Array("mediafs: \(message)\n".utf8)
    _ = text.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
    exit(status)
}

// The real arguments first (a daemon's come from a pipe), then no
// password in a URL left on this process's command line.
let arguments = ProgramArguments.all
ProgramArguments.maskOwnCommandLine()
do {
    switch arguments.first {
    case "mount": try MountCommand(arguments: Array(arguments.dropFirst())).run()
    case "status": try StatusCommand(arguments: Array(arguments.dropFirst())).run()
    case "purge": try AdminCommands.purge(Array(arguments.dropFirst()))
    case "preload": try AdminCommands.preload(Array(arguments.dropFirst()))
    case "pin": try AdminCommands.pin(Array(arguments.dropFirst()), on: true)
    case "unpin": try AdminCommands.pin(Array(arguments.dropFirst()), on: false)
    case "cache": try CacheCommand(arguments: Array(arguments.dropFirst())).run()
    case "add":
        try AdminCommands.change(Array(arguments.dropFirst()), key: "add", flag: "--to", usage: AdminCommands.addUsage)
    case "remove":
        try AdminCommands.change(Array(arguments.dropFirst()), key: "remove", flag: "--from",
                                 usage: AdminCommands.removeUsage)
    case "-V", "--version": print("mediafs \(MediaCacheVersion.string)")
    case "-h", "--help", nil: print(MountCommand.usage)
    default:
        // mount.fuse3 (fstab, `mount -t fuse.mediafs`) runs
        // `mediafs SOURCE MOUNTPOINT -o OPTIONS`, with no command word.
        try MountCommand(arguments: arguments).run()
    }
} catch let error as UsageError {
    fail("\(error)\n\(MountCommand.usage)", status: 2)
} catch {
    fail("\(error)", status: 1)
}
