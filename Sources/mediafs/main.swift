// mediafs: remote media as local, read-only files.
import MediaCache
#if canImport(Glibc)
import Glibc
#endif

func fail(_ message: String, status: Int32) -> Never {
    var text = Array("mediafs: \(message)\n".utf8)
    _ = text.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
    exit(status)
}

var arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "mount":
    do {
        try MountCommand(arguments: Array(arguments.dropFirst())).run()
    } catch let error as UsageError {
        fail("\(error)\n\(MountCommand.usage)", status: 2)
    } catch {
        fail("\(error)", status: 1)
    }
case "-V", "--version":
    print("mediafs \(MediaCacheVersion.string)")
case "-h", "--help", nil:
    print(MountCommand.usage)
default:
    fail("unknown command '\(arguments[0])'\n\(MountCommand.usage)", status: 2)
}
