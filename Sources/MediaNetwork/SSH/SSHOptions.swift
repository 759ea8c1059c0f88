// What an `sftp://` request authenticates and verifies with, taken as ssh
// takes them: the host key checked against `known_hosts` (`--ssh-known-hosts`,
// else ~/.ssh/known_hosts), keys from `--ssh-key` or ~/.ssh (id_ed25519,
// id_ecdsa, id_rsa), the agent at SSH_AUTH_SOCK, a password from the URL or
// ~/.netrc. Settled once, before mounting: a named file that cannot be read
// is refused then, never found missing by a read later. Paths only: no key
// or password is held here.
import Foundation
import MediaSupport

package struct SSHOptions: Sendable, Equatable {
    /// Where host keys are verified: an absolute path (it may not exist:
    /// then every host is unknown and refused).
    package var knownHosts: String
    /// Private keys offered, in order: `--ssh-key`, else those of ~/.ssh
    /// that exist.
    package var identities: [String]
    /// The login when the URL names none: the user running mediafs, as ssh.
    package var defaultUser: String
    /// Whether the agent is asked (SSH_AUTH_SOCK is set).
    package var agent: Bool

    /// The keys ~/.ssh may hold, in the order ssh offers them.
    package static let defaultKeyNames = ["id_ed25519", "id_ecdsa", "id_rsa"]

    package init() {
        let home = Self.home
        knownHosts = home + "/.ssh/known_hosts"
        identities = Self.defaultKeyNames.map { home + "/.ssh/" + $0 }.filter { FileManager.default.isReadableFile(atPath: $0) }
        defaultUser = ProcessInfo.processInfo.environment["USER"].flatMap { $0.isEmpty ? nil : $0 } ?? NSUserName()
        agent = !(ProcessInfo.processInfo.environment["SSH_AUTH_SOCK"] ?? "").isEmpty
    }

    /// `--ssh-key FILE`: the one key offered (besides the agent's); it must
    /// be a readable file.
    package mutating func setKey(_ path: String, relativeTo directory: String) throws {
        let absolute = Self.absolute(path, relativeTo: directory)
        guard FileManager.default.isReadableFile(atPath: absolute) else {
            throw MediaError(EINVAL, "--ssh-key '\(path)': no readable file there")
        }
        identities = [absolute]
    }

    /// `--ssh-known-hosts FILE`: it must be a readable file.
    package mutating func setKnownHosts(_ path: String, relativeTo directory: String) throws {
        let absolute = Self.absolute(path, relativeTo: directory)
        guard FileManager.default.isReadableFile(atPath: absolute) else {
            throw MediaError(EINVAL, "--ssh-known-hosts '\(path)': no readable file there")
        }
        knownHosts = absolute
    }

    /// $HOME, as ssh and libcurl take it; else the user's entry's.
    package static var home: String {
        ProcessInfo.processInfo.environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
    }

    static func absolute(_ path: String, relativeTo directory: String) -> String {
        path.hasPrefix("/") ? path : directory + "/" + path
    }
}
