// The one error type of the core: an errno for the kernel plus a message for
// the log and the command line.
import Foundation
#if canImport(Glibc)
import Glibc
#endif

public struct MediaError: Error, CustomStringConvertible, Sendable {
    package let errno: Int32
    package let message: String
    /// Its one log line was written where it arose (a budget's refusal,
    /// once per process and file): the FUSE layer logs it no more.
    package let logged: Bool

    package init(_ errno: Int32, _ message: String, logged: Bool = false) {
        self.errno = errno
        self.message = message
        self.logged = logged
    }

    public var description: String { message }

    /// An I/O failure, the errno a reader sees when the bytes cannot be had.
    package static func io(_ message: String) -> MediaError { MediaError(EIO, message) }

    /// The errno of the last failed system call, with what was being done.
    package static func system(_ what: String, errno code: Int32 = Glibc.errno) -> MediaError {
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
    package static func redacted(_ url: String) -> String {
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
    /// Read from the text as written (MediaURL.writtenAuthority), so a URL
    /// libcurl refuses is redacted too. Asked of every request's URL on the
    /// network thread: a byte scan, no parse.
    package static func userinfoRange(in url: String) -> Range<String.Index>? {
        guard let authority = MediaURL.writtenAuthority(in: url),
              let at = url.utf8[authority].lastIndex(of: UInt8(ascii: "@")) else { return nil }
        return authority.lowerBound..<url.utf8.index(after: at)
    }
}
