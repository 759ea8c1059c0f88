// A server's host key as ssh shows it (`ED25519 key SHA256:…`, the
// fingerprint `ssh-keygen -lf` prints), what known_hosts said of it, and the
// refusal that names both: an unknown or changed key stops the mount, never
// a silent accept. Keys a session verified are kept for the process, so a
// read (libcurl's own SSH connection) is pinned to the key its directory's
// listing saw, besides being checked against the same known_hosts.
import Foundation
import MediaSupport

package struct SSHHostKey: Sendable, Equatable {
    /// `ED25519`, `RSA`, `ECDSA`…, as ssh names the type.
    package var type: String
    /// The SHA-256 of the key blob, base64 without padding (OpenSSH's form).
    package var sha256: String

    package var fingerprint: String { "SHA256:\(sha256)" }

    /// What known_hosts says of a host's key.
    package enum Verdict: Sendable, Equatable {
        case match, mismatch, unknown
    }

    package init(type: String, sha256 digest: [UInt8]) {
        self.type = type
        sha256 = Self.unpadded(Data(digest).base64EncodedString())
    }

    static func unpadded(_ base64: String) -> String {
        String(base64.reversed().drop { $0 == "=" }.reversed())
    }

    /// The refusal for a key known_hosts does not vouch for: the host, the
    /// key's fingerprint, the file, and what to do about it.
    package func refusal(_ verdict: Verdict, host: String, port: Int, knownHosts: String) -> MediaError {
        let name = port == 22 ? host : "[\(host)]:\(port)"
        switch verdict {
        case .match:
            return MediaError(EIO, "\(name): host key \(type) \(fingerprint) verified")
        case .mismatch:
            return MediaError(EACCES, "\(name): HOST KEY CHANGED: the server offers \(type) key \(fingerprint), which is "
                              + "not the key \(knownHosts) holds for it; refused (someone may be in the middle; if the "
                              + "change is expected, remove the old line with ssh-keygen -R '\(name)' -f \(knownHosts))")
        case .unknown:
            return MediaError(EACCES, "\(name): unknown host key \(type) \(fingerprint), not in \(knownHosts); refused "
                              + "(check the fingerprint with the server's owner, then add it, e.g. "
                              + "ssh-keyscan -p \(port) \(host) >> \(knownHosts))")
        }
    }

    /// Keys verified this process, by origin (`sftp://host:port`).
    private static let verified = Locked<[HTTPOrigin: SSHHostKey]>([:])

    package static func noteVerified(_ key: SSHHostKey, for origin: HTTPOrigin) {
        verified.withLock { $0[origin] = key }
    }

    package static func verifiedKey(for origin: HTTPOrigin) -> SSHHostKey? {
        verified.withLock { $0[origin] }
    }
}
