// Where S3 requests get their keys, as every AWS tool takes them:
// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN in the
// environment, else the profile (AWS_PROFILE or `--s3-profile`, else
// `default`) in ~/.aws/credentials, then in ~/.aws/config; none: anonymous.
// Keys from a file are re-read when the file changes (a stat at every
// request), so a rotated session token reaches the next request; keys from
// the environment hold for the mount's life. The secrets stay here and in
// the handle they are set on: `description` says where they came from,
// never what they are.
import Foundation
import MediaSupport
#if canImport(Glibc)
import Glibc
#endif

/// One set of keys.
package struct S3Key: Sendable, Equatable {
    package var accessKeyID: String
    package var secretAccessKey: String
    package var sessionToken: String?

    package init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
    }

    /// The keys a profile's settings hold; nil when it holds none.
    static func from(_ settings: [String: String]) -> S3Key? {
        guard let id = settings["aws_access_key_id"], let secret = settings["aws_secret_access_key"],
              !id.isEmpty, !secret.isEmpty else { return nil }
        let token = settings["aws_session_token"] ?? settings["aws_security_token"]
        return S3Key(accessKeyID: id, secretAccessKey: secret, sessionToken: token?.isEmpty == false ? token : nil)
    }
}

/// The profile a mount reads, and the two files it lives in.
package struct AWSProfile: Sendable, Equatable {
    package var name: String
    /// Named by AWS_PROFILE or `--s3-profile`: then it must exist.
    package var isExplicit: Bool
    package var credentialsPath: String
    package var configPath: String

    /// AWS_SHARED_CREDENTIALS_FILE and AWS_CONFIG_FILE, else ~/.aws/, made
    /// absolute now: the daemon changes to `/`.
    package init(name: String? = nil, environment: [String: String]) {
        let given = name ?? environment["AWS_PROFILE"] ?? environment["AWS_DEFAULT_PROFILE"]
        self.name = given ?? "default"
        isExplicit = given != nil
        let home = environment["HOME"] ?? NSHomeDirectory()
        let directory = FileManager.default.currentDirectoryPath
        func absolute(_ path: String) -> String {
            let expanded = path.hasPrefix("~/") ? home + path.dropFirst() : path
            return expanded.hasPrefix("/") ? expanded : directory + "/" + expanded
        }
        credentialsPath = absolute(environment["AWS_SHARED_CREDENTIALS_FILE"] ?? "~/.aws/credentials")
        configPath = absolute(environment["AWS_CONFIG_FILE"] ?? "~/.aws/config")
    }

    /// The profile's settings in the config file (region, endpoint_url...); empty when none.
    package func configSettings() throws -> [String: String] {
        try AWSConfigFile.load(path: configPath)?.profile(name, isConfig: true) ?? [:]
    }
}

package final class S3Credentials: Sendable {
    package enum Origin: Sendable, Equatable {
        case environment
        case file(path: String, profile: String, isConfig: Bool)
    }

    package let origin: Origin
    private let state: Locked<State>

    private struct State {
        var key: S3Key
        /// The file's identity and size and time when `key` was read.
        var stamp: FileStamp?
    }

    struct FileStamp: Equatable {
        var device: UInt64
        var inode: UInt64
        var size: Int64
        var seconds: Int
        var nanoseconds: Int

        init?(path: String) {
            var info = stat()
            guard stat(path, &info) == 0 else { return nil }
            device = UInt64(info.st_dev)
            inode = UInt64(info.st_ino)
            size = Int64(info.st_size)
            seconds = info.st_mtim.tv_sec
            nanoseconds = info.st_mtim.tv_nsec
        }
    }

    package init(key: S3Key, origin: Origin = .environment) {
        self.origin = origin
        let stamp: FileStamp? = if case .file(let path, _, _) = origin { FileStamp(path: path) } else { nil }
        state = Locked(State(key: key, stamp: stamp))
    }

    /// Where the keys come from, for errors and logs: no secret in it.
    package var description: String {
        switch origin {
        case .environment: return "AWS_ACCESS_KEY_ID from the environment"
        case .file(let path, let profile, _): return "profile '\(profile)' of \(path)"
        }
    }

    /// The keys to sign the next request with: those of a file re-read
    /// first when the file changed since they were read.
    package func current() -> S3Key {
        guard case .file(let path, _, _) = origin else { return state.withLock { $0.key } }
        let stamp = FileStamp(path: path)
        if let key = state.withLock({ $0.stamp == stamp ? $0.key : nil }) { return key }
        return reread(path: path, stamp: stamp)
    }

    /// Reads a file's keys again whether or not it looks changed (after a
    /// server said the token expired, within a second of a rewrite).
    package func reload() {
        guard case .file(let path, _, _) = origin else { return }
        _ = reread(path: path, stamp: FileStamp(path: path))
    }

    private func reread(path: String, stamp: FileStamp?) -> S3Key {
        guard case .file(_, let profile, let isConfig) = origin else { return state.withLock { $0.key } }
        let fresh: S3Key?
        do {
            fresh = try AWSConfigFile.load(path: path)?.profile(profile, isConfig: isConfig).flatMap(S3Key.from)
        } catch {
            Log.warning("S3 credentials: \(error); keeping the keys read before")
            fresh = nil
        }
        return state.withLock { state in
            state.stamp = stamp
            if let fresh {
                if fresh != state.key { Log.info("S3 credentials: \(description) changed; the next requests use it") }
                state.key = fresh
            } else {
                Log.warning("S3 credentials: \(description) has no aws_access_key_id and aws_secret_access_key now; "
                            + "keeping the keys read before")
            }
            return state.key
        }
    }

    /// The keys a mount signs with; nil: anonymous. Throws when the
    /// environment or a profile names keys it does not hold in full, or a
    /// profile named explicitly does not exist.
    package static func resolve(environment: [String: String], profile: AWSProfile) throws -> S3Credentials? {
        let id = environment["AWS_ACCESS_KEY_ID"] ?? ""
        let secret = environment["AWS_SECRET_ACCESS_KEY"] ?? ""
        if !id.isEmpty || !secret.isEmpty {
            guard !id.isEmpty, !secret.isEmpty else {
                throw MediaError(EINVAL, id.isEmpty ? "AWS_SECRET_ACCESS_KEY is set without AWS_ACCESS_KEY_ID"
                                 : "AWS_ACCESS_KEY_ID is set without AWS_SECRET_ACCESS_KEY")
            }
            let token = environment["AWS_SESSION_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
            return S3Credentials(key: S3Key(accessKeyID: id, secretAccessKey: secret, sessionToken: token))
        }
        var found = false
        for (path, isConfig) in [(profile.credentialsPath, false), (profile.configPath, true)] {
            guard let settings = try AWSConfigFile.load(path: path)?.profile(profile.name, isConfig: isConfig) else {
                continue
            }
            found = true
            if let key = S3Key.from(settings) {
                return S3Credentials(key: key, origin: .file(path: path, profile: profile.name, isConfig: isConfig))
            }
            if let source = ["credential_process", "role_arn", "sso_session", "sso_start_url", "web_identity_token_file"]
                .first(where: { settings[$0] != nil }) {
                throw MediaError(ENOTSUP, "profile '\(profile.name)' of \(path) gets its keys through \(source), "
                                 + "which mediafs does not run; export them (aws configure export-credentials "
                                 + "--format env) or write aws_access_key_id and aws_secret_access_key")
            }
        }
        if profile.isExplicit && !found {
            throw MediaError(ENOENT, "profile '\(profile.name)' is in neither \(profile.credentialsPath) "
                             + "nor \(profile.configPath)")
        }
        return nil
    }
}
