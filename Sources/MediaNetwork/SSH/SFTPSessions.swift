// SFTP sessions kept open between listings, per server and login, so a
// listing (and the first one after the mount's check of its source) pays
// the SSH handshake and login once, not each time: at 100 ms a round trip
// that is a second a listing. A session is used by one caller at a time
// (taken out, given back); one that fails in transport is closed and the
// listing runs once more on a new one, so a server restarted meanwhile
// costs nothing but that handshake. Reads (SFTPFetcher) take and give
// back the same sessions, with the files they keep open. Keys are held in
// memory only.
import Foundation
import MediaSupport

package enum SFTPSessions {
    /// Idle sessions kept per server and login: a listing at a time runs
    /// on the listings worker, and a lookup's first listing beside it.
    /// Reads (SFTPFetcher) run on up to `SFTPFetcher.maxSessionsPerServer`
    /// of them at once, and keep them all.
    package static let maxIdlePerKey = 4

    private static let idle = Locked<[String: [SFTPSession]]>([:])

    /// `body` run on a kept session for `url`'s server and login, or a new
    /// one; the session is kept again after it, unless it failed in
    /// transport (EIO and the like): then `body` runs once more on a new
    /// session, whose failure is the answer.
    package static func with<T>(url: String, options: HTTPOptions, timeout: Int,
                                _ body: (SFTPSession) throws -> T) throws -> T {
        let key = key(url: url, options: options)
        if let kept = take(key) {
            do {
                let result = try body(kept)
                give(kept, key)
                return result
            } catch let error as MediaError where !isTransport(error) {
                give(kept, key)
                throw error
            } catch {
                Log.debug("\(MediaError.redacted(url)): a kept SFTP session failed (\(error)); on a new one")
            }
        }
        let session = try SFTPSession(url: url, options: options, timeout: timeout)
        do {
            let result = try body(session)
            give(session, key)
            return result
        } catch let error as MediaError where !isTransport(error) {
            give(session, key)
            throw error
        }
    }

    /// Whether a failure says the session is gone, not what it was asked.
    package static func isTransport(_ error: MediaError) -> Bool {
        ![ENOENT, EACCES, ENOTDIR, EISDIR, EFBIG].contains(error.errno)
    }

    /// A kept session for `url`'s server and login, or nil: the caller
    /// (a read) opens one itself, and gives either back with `give`.
    package static func take(url: String, options: HTTPOptions) -> SFTPSession? {
        take(key(url: url, options: options))
    }

    /// Keeps `session` for later, unless it broke.
    package static func give(_ session: SFTPSession, url: String, options: HTTPOptions) {
        give(session, key(url: url, options: options))
    }

    private static func take(_ key: String) -> SFTPSession? {
        idle.withLock { $0[key]?.popLast() }
    }

    private static func give(_ session: SFTPSession, _ key: String) {
        guard !session.broken else { return }
        let extra: SFTPSession? = idle.withLock { sessions in
            var list = sessions[key, default: []]
            list.append(session)
            let dropped = list.count > maxIdlePerKey ? list.removeFirst() : nil
            sessions[key] = list
            return dropped
        }
        // Closed outside the lock: a disconnect is a write to the server.
        _ = extra
    }

    /// Server, login and what it logs in and verifies with: sessions made
    /// with other credentials or another known_hosts are never shared.
    static func key(url: String, options: HTTPOptions) -> String {
        let parsed = MediaURL(url)
        let parts = [parsed?.user ?? "", parsed?.password ?? "", parsed?.host ?? "", String(parsed?.effectivePort ?? 0),
                     options.ssh.knownHosts, options.ssh.identities.joined(separator: "\u{1}"), options.netrc ? "n" : ""]
        return parts.joined(separator: "\u{0}")
    }
}
