// Which host key types a known_hosts file holds for a server, so the SSH
// handshake asks the server for one of those. A server offers several keys
// (Debian's sshd: RSA, ECDSA and Ed25519) and sends the one the client
// prefers; OpenSSH's client prefers Ed25519 and records only the key it
// saw, while libssh2 prefers ECDSA: left to its own order, a host the user
// reached with ssh reads as unknown here, and the mount is refused.
// OpenSSH orders its own preference by the types known_hosts has for the
// host in the same way. Only the order is decided here: the key is still
// checked by libssh2 against the file (SFTPSession.verifyHostKey), so a
// line this reads wrongly costs a refusal, never a key accepted.
import CCrypto
import Foundation
import MediaSupport

package enum KnownHostTypes {
    /// A known_hosts larger than this is read for no types (the check still
    /// reads it whole, through libssh2).
    static let maxFileBytes = 8 << 20

    /// The key types of `text`'s lines that name `host` on `port`, in
    /// file order, each once: `ssh-ed25519`, `ecdsa-sha2-nistp256`, ….
    /// Plain and hashed (`|1|salt|hash`) names, `[host]:port` for a port
    /// other than 22, patterns with `*` and `?`, and `!` negations, as
    /// sshd(8)'s SSH_KNOWN_HOSTS FILE FORMAT says; `@revoked` and
    /// `@cert-authority` lines name no key to ask for.
    package static func types(for host: String, port: Int, in text: String) -> [String] {
        let name = (port == 22 ? host : "[\(host)]:\(port)").lowercased()
        var found: [String] = []
        for line in text.split(whereSeparator: \.isNewline) {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard fields.count >= 3, !fields[0].hasPrefix("#"), !fields[0].hasPrefix("@") else { continue }
            let type = String(fields[1])
            if !found.contains(type), names(String(fields[0]), match: name) { found.append(type) }
        }
        return found
    }

    /// The same, read from the file at `path`; none when it cannot be read.
    package static func types(for host: String, port: Int, inFile path: String) -> [String] {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
              let size = attributes[.size] as? Int, size <= maxFileBytes,
              let data = FileManager.default.contents(atPath: path) else { return [] }
        return types(for: host, port: port, in: String(decoding: data, as: UTF8.self))
    }

    /// The libssh2 host key methods that verify a key of known_hosts `type`
    /// (an RSA key signs with SHA-2 first, as servers now ask).
    package static func methods(for type: String) -> [String] {
        type == "ssh-rsa" ? ["rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"] : [type]
    }

    /// libssh2's method preference: the methods of the known types first,
    /// then every other method it supports, in its own order, so a key
    /// the file lacks still comes and is refused naming its fingerprint.
    package static func preference(known: [String], supported: [String]) -> String? {
        let first = known.flatMap(methods(for:)).filter(supported.contains)
        guard !first.isEmpty else { return nil }
        return (first + supported.filter { !first.contains($0) }).joined(separator: ",")
    }

    /// Whether a line's comma-separated host patterns name `name`: one
    /// matches and none negated does.
    static func names(_ patterns: String, match name: String) -> Bool {
        if patterns.hasPrefix("|1|") { return hashed(patterns, match: name) }
        var matched = false
        for pattern in patterns.split(separator: ",") {
            let negated = pattern.hasPrefix("!")
            let body = (negated ? pattern.dropFirst() : pattern[...]).lowercased()
            guard wildcard(Array(body.utf8), matches: Array(name.utf8)) else { continue }
            if negated { return false }
            matched = true
        }
        return matched
    }

    /// OpenSSH's patterns: `*` any run, `?` any one byte, nothing else
    /// special (a `[host]:port` is literal; fnmatch would read a class).
    static func wildcard(_ pattern: [UInt8], matches text: [UInt8]) -> Bool {
        var (p, t) = (0, 0)
        var star: (p: Int, t: Int)?
        while t < text.count {
            if p < pattern.count, pattern[p] == UInt8(ascii: "?") || pattern[p] == text[t] {
                p += 1
                t += 1
            } else if p < pattern.count, pattern[p] == UInt8(ascii: "*") {
                star = (p, t)
                p += 1
            } else if let last = star {
                // The last star takes one more byte.
                star = (last.p, last.t + 1)
                (p, t) = (last.p + 1, last.t + 1)
            } else {
                return false
            }
        }
        while p < pattern.count, pattern[p] == UInt8(ascii: "*") { p += 1 }
        return p == pattern.count
    }

    /// `|1|salt|hash`: HMAC-SHA1 of the name under the salt, both base64.
    static func hashed(_ entry: String, match name: String) -> Bool {
        let parts = entry.split(separator: "|", omittingEmptySubsequences: false)
        guard parts.count == 4, let salt = Data(base64Encoded: String(parts[2])),
              let expected = Data(base64Encoded: String(parts[3])), expected.count == 20 else { return false }
        var digest = [UInt8](repeating: 0, count: 20)
        var length: UInt32 = 0
        let message = Array(name.utf8)
        let done = salt.withUnsafeBytes { key in
            HMAC(EVP_sha1(), key.baseAddress, Int32(key.count), message, message.count, &digest, &length)
        }
        return done != nil && length == 20 && Data(digest) == expected
    }
}
