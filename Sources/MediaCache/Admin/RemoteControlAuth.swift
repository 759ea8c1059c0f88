// Who may call the remote control (`--rc`): as rclone requires by default,
// a user and password (HTTP Basic: `--rc-user` with `--rc-pass-file` or
// MEDIAFS_RC_PASS, so the password is never in `ps`), or an htpasswd file
// (`--rc-htpasswd`, bcrypt or SHA-crypt entries, checked by libcrypt), or
// nobody at all (`--rc-no-auth`, on a loopback address only).
import Foundation
#if canImport(Glibc)
import Glibc
import CSystem
import MediaSupport
#endif

public enum RemoteControlAuth: Sendable, Equatable {
    case none
    case basic(user: String, password: String)
    /// htpasswd entries: user → crypt(3) hash.
    case htpasswd([String: String])

    /// The largest htpasswd file read, and its longest line.
    static let maxFileBytes = 1 << 20

    /// Reads an htpasswd file; throws naming the file and line of an entry
    /// that is not `user:hash` with a hash libcrypt checks.
    public static func htpasswd(file path: String) throws -> RemoteControlAuth {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw MediaError(ENOENT, "--rc-htpasswd \(path) cannot be read")
        }
        guard data.count <= maxFileBytes else { throw MediaError(EFBIG, "--rc-htpasswd \(path) is over 1 MiB") }
        var entries: [String: String] = [:]
        for (number, line) in String(decoding: data, as: UTF8.self).split(separator: "\n").enumerated() {
            let text = line.trimmingCharacters(in: .whitespacesAndNewlines)
            if text.isEmpty || text.hasPrefix("#") { continue }
            guard let colon = text.firstIndex(of: ":"), colon != text.startIndex else {
                throw MediaError(EINVAL, "--rc-htpasswd \(path) line \(number + 1) is not USER:HASH")
            }
            let user = String(text[..<colon])
            let hash = String(text[text.index(after: colon)...])
            guard ["$2y$", "$2b$", "$2a$", "$6$", "$5$"].contains(where: hash.hasPrefix) else {
                throw MediaError(EINVAL, "--rc-htpasswd \(path) line \(number + 1): \(user)'s hash is not bcrypt or "
                                 + "SHA-crypt (make it with htpasswd -B)")
            }
            entries[user] = hash
        }
        guard !entries.isEmpty else { throw MediaError(EINVAL, "--rc-htpasswd \(path) has no USER:HASH line") }
        return .htpasswd(entries)
    }

    /// Whether a request's `Authorization` header lets it in.
    func admits(authorization: String?) -> Bool {
        if case .none = self { return true }
        guard let (user, password) = Self.basicCredentials(authorization) else { return false }
        switch self {
        case .none:
            return true
        case .basic(let expectedUser, let expectedPassword):
            // Both compared whole, in time that does not depend on where they differ.
            let userMatches = Self.sameBytes(user, expectedUser)
            let passwordMatches = Self.sameBytes(password, expectedPassword)
            return userMatches && passwordMatches
        case .htpasswd(let entries):
            guard let hash = entries[user] else { return false }
            return Self.cryptMatches(password, hash: hash)
        }
    }

    /// User and password of `Basic base64(user:password)`; nil for anything else.
    static func basicCredentials(_ header: String?) -> (String, String)? {
        guard let header, header.count <= 4096 else { return nil }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "basic",
              let decoded = Data(base64Encoded: String(parts[1]).trimmingCharacters(in: .whitespaces)),
              let text = String(data: decoded, encoding: .utf8), let colon = text.firstIndex(of: ":") else { return nil }
        return (String(text[..<colon]), String(text[text.index(after: colon)...]))
    }

    static func sameBytes(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        var difference = UInt8(x.count == y.count ? 0 : 1)
        for index in 0..<max(x.count, y.count) {
            difference |= (index < x.count ? x[index] : 0) ^ (index < y.count ? y[index] : 0)
        }
        return difference == 0
    }

    /// libcrypt's own check of `password` against a crypt(3) hash.
    static func cryptMatches(_ password: String, hash: String) -> Bool {
        var data = crypt_data()
        guard let result = crypt_r(password, hash, &data) else { return false }
        return sameBytes(String(cString: result), hash)
    }
}
