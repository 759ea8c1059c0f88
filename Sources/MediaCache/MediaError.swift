// The one error type of the core: an errno for the kernel plus a message for
// the log and the command line.
#if canImport(Glibc)
import Glibc
#endif

public struct MediaError: Error, CustomStringConvertible, Sendable {
    public let errno: Int32
    public let message: String

    public init(_ errno: Int32, _ message: String) {
        self.errno = errno
        self.message = message
    }

    public var description: String { message }

    /// An I/O failure, the errno a reader sees when the bytes cannot be had.
    public static func io(_ message: String) -> MediaError { MediaError(EIO, message) }

    /// The errno of the last failed system call, with what was being done.
    public static func system(_ what: String, errno code: Int32 = Glibc.errno) -> MediaError {
        MediaError(code, "\(what): \(String(cString: strerror(code)))")
    }
}

extension MediaError {
    /// A URL fit for logs and listings: `user:password@` removed.
    public static func redacted(_ url: String) -> String {
        guard let scheme = url.range(of: "://") else { return url }
        let rest = url[scheme.upperBound...]
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
        guard let at = rest[..<authorityEnd].lastIndex(of: "@") else { return url }
        return String(url[..<scheme.upperBound]) + String(rest[rest.index(after: at)...])
    }
}
