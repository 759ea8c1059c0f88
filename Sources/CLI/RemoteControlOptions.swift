// `--rc ADDR:PORT` and how its callers prove who they are: a user and a
// password (from `--rc-pass-file` or MEDIAFS_RC_PASS, never the command
// line, where `ps` would show it), an htpasswd file, or, on a loopback
// address only, nobody (`--rc-no-auth`). As rclone 1.74 does, a remote
// control with none of them is refused.
import Foundation
import MediaCache
import MediaSupport

struct RemoteControlOptions {
    var address: MetricsAddress?
    var user: String?
    var passwordFile: String?
    var htpasswd: String?
    var noAuth = false

    static let passwordVariable = "MEDIAFS_RC_PASS"
    /// The longest password file read.
    static let maxPasswordBytes = 4096

    /// Takes one of its options; returns false for any other.
    mutating func take(_ option: String, value: () throws -> String) throws -> Bool {
        switch option {
        case "--rc":
            let text = try value()
            guard let parsed = MetricsAddress(text) else {
                throw UsageError("--rc needs ADDR:PORT such as 127.0.0.1:5572 (a numeric address or localhost), not '\(text)'")
            }
            address = parsed
        case "--rc-user": user = try value()
        case "--rc-pass-file": passwordFile = try value()
        case "--rc-htpasswd": htpasswd = try value()
        case "--rc-no-auth": noAuth = true
        case "--rc-pass":
            throw UsageError("--rc-pass on the command line would show the password in ps: put it in a file "
                             + "(--rc-pass-file FILE) or in \(Self.passwordVariable)")
        default: return false
        }
        return true
    }

    /// The remote control to serve, nil without `--rc`; throws for a missing
    /// or unusable way to authenticate.
    func resolve(mountpoint: String, environment: [String: String]) throws -> RemoteControl? {
        guard let address else {
            if user != nil || passwordFile != nil || htpasswd != nil || noAuth {
                throw UsageError("--rc-user, --rc-pass-file, --rc-htpasswd and --rc-no-auth need --rc ADDR:PORT")
            }
            return nil
        }
        let auth: RemoteControlAuth
        if noAuth {
            guard address.isLoopback else {
                throw UsageError("--rc-no-auth is for a loopback address only (127.0.0.1, [::1]), not \(address)")
            }
            guard user == nil, htpasswd == nil else { throw UsageError("--rc-no-auth with --rc-user or --rc-htpasswd") }
            auth = .none
        } else if let htpasswd {
            guard user == nil else { throw UsageError("--rc-htpasswd names its users: no --rc-user with it") }
            do {
                auth = try RemoteControlAuth.htpasswd(file: htpasswd)
            } catch let error as MediaError {
                throw UsageError(error.message)
            }
        } else if let user, !user.isEmpty {
            auth = .basic(user: user, password: try password(environment))
        } else {
            throw UsageError("--rc \(address) needs --rc-user with --rc-pass-file FILE (or \(Self.passwordVariable)), "
                             + "--rc-htpasswd FILE, or --rc-no-auth on a loopback address")
        }
        return RemoteControl(auth: auth, mountpoint: mountpoint)
    }

    private func password(_ environment: [String: String]) throws -> String {
        if let passwordFile {
            guard let data = FileManager.default.contents(atPath: passwordFile), data.count <= Self.maxPasswordBytes else {
                throw UsageError("--rc-pass-file \(passwordFile) cannot be read (or is over 4 KiB)")
            }
            let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .newlines)
            guard !text.isEmpty else { throw UsageError("--rc-pass-file \(passwordFile) is empty") }
            return text
        }
        guard let text = environment[Self.passwordVariable], !text.isEmpty else {
            throw UsageError("--rc-user needs a password: --rc-pass-file FILE or \(Self.passwordVariable)")
        }
        return text
    }
}
