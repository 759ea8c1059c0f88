// The one error type of the core: an errno for the kernel plus a message for
// the log and the command line.
import Foundation
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
    /// Query parameters whose value is a secret, lower-cased: the signatures,
    /// tokens and keys of signed URLs (S3, CloudFront, GCS, Azure SAS, CDNs).
    static let secretParameters: Set<String> = [
        "sig", "signature", "x-amz-signature", "x-amz-credential", "x-amz-security-token",
        "x-goog-signature", "x-goog-credential", "key", "key-pair-id", "policy", "token", "access_token",
        "auth", "password", "pass", "passwd", "pwd", "secret", "apikey", "api_key", "api-key",
        "hmac", "hdnts", "hdnea", "jwt", "session", "sessionid", "credential", "credentials",
    ]
    /// Name parts that mark a secret whatever the rest of the name says.
    static let secretNameParts = ["token", "signature", "secret", "password", "credential", "apikey", "api_key", "auth"]

    /// A URL fit for logs, attributes and status: `user:password@` removed
    /// and the values of secret parameters replaced, in the query and in a
    /// fragment (where OAuth puts tokens), so a signed URL shows which file
    /// it is without what opens it.
    public static func redacted(_ url: String) -> String {
        var shown = url
        if let userinfo = userinfoRange(in: shown) { shown.removeSubrange(userinfo) }
        let hash = shown.firstIndex(of: "#") ?? shown.endIndex
        var result = String(shown[..<hash])
        if let question = result.firstIndex(of: "?") {
            result = String(result[...question]) + redactedParameters(result[result.index(after: question)...])
        }
        if hash < shown.endIndex {
            result += "#" + redactedParameters(shown[shown.index(after: hash)...])
        }
        return result
    }

    /// `a=1&sig=2` as `a=1&sig=REDACTED`.
    static func redactedParameters(_ text: Substring) -> String {
        text.split(separator: "&", omittingEmptySubsequences: false).map { parameter in
            guard let equals = parameter.firstIndex(of: "="), isSecret(name: parameter[..<equals]) else {
                return String(parameter)
            }
            return parameter[...equals] + "REDACTED"
        }.joined(separator: "&")
    }

    static func isSecret(name: Substring) -> Bool {
        let name = (String(name).removingPercentEncoding ?? String(name)).lowercased()
        return secretParameters.contains(name) || secretNameParts.contains { name.contains($0) }
    }

    /// The `user:password@` of a URL, `@` included; nil when it has none.
    public static func userinfoRange(in url: String) -> Range<String.Index>? {
        // Asked of every request's URL on the network thread: an ASCII URL
        // (nearly all) is scanned byte by byte, where each byte is one
        // Character, so the answer is the same as the general path's.
        if let scanned = url.utf8.withContiguousStorageIfAvailable({ asciiUserinfoBounds(in: $0) }), scanned.ascii {
            guard let bounds = scanned.bounds else { return nil }
            let utf8 = url.utf8
            return utf8.index(utf8.startIndex, offsetBy: bounds.lowerBound)
                ..< utf8.index(utf8.startIndex, offsetBy: bounds.upperBound)
        }
        guard let scheme = url.range(of: "://") else { return nil }
        let rest = url[scheme.upperBound...]
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
        guard let at = rest[..<authorityEnd].lastIndex(of: "@") else { return nil }
        return scheme.upperBound..<rest.index(after: at)
    }

    /// `userinfoRange`'s bounds as byte offsets in an ASCII URL; `ascii`
    /// false when the URL is not ASCII (the caller takes the general path).
    private static func asciiUserinfoBounds(in bytes: UnsafeBufferPointer<UInt8>) -> (ascii: Bool, bounds: Range<Int>?) {
        guard !bytes.contains(where: { $0 >= 0x80 }) else { return (false, nil) }
        let colon = UInt8(ascii: ":"), slash = UInt8(ascii: "/")
        var index = 0
        while index + 2 < bytes.count && !(bytes[index] == colon && bytes[index + 1] == slash && bytes[index + 2] == slash) {
            index += 1
        }
        guard index + 2 < bytes.count else { return (true, nil) }
        let authority = index + 3
        var at: Int?
        for offset in authority..<bytes.count {
            let byte = bytes[offset]
            if byte == slash || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#") { break }
            if byte == UInt8(ascii: "@") { at = offset }
        }
        return (true, at.map { authority..<($0 + 1) })
    }
}
