// ~/.netrc read as curl and ftp read it, for the SFTP listing's session
// (libcurl reads it itself for reads): `machine HOST`, `default`, then
// `login`, `password` (and `account`, `macdef`, skipped) as whitespace-
// separated tokens. Bounded: a file over 1 MiB or a token over 4 KiB is
// ignored whole, with its reason; nothing of it is ever logged.
import Foundation
import MediaSupport

package struct Netrc: Sendable, Equatable {
    package struct Entry: Sendable, Equatable {
        /// nil: the `default` entry.
        package var machine: String?
        package var login: String?
        package var password: String?
    }

    package var entries: [Entry]

    package static let maxBytes = 1 << 20
    package static let maxToken = 4096

    /// The entries of `text`; nil when it is not a netrc curl would read.
    package init?(text: String) {
        guard text.utf8.count <= Self.maxBytes else { return nil }
        var entries: [Entry] = []
        var tokens = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" })[...]
        guard tokens.allSatisfy({ $0.utf8.count <= Self.maxToken }) else { return nil }
        var inMacro = false
        while let token = tokens.popFirst() {
            switch token {
            case "machine":
                guard let name = tokens.popFirst() else { return nil }
                entries.append(Entry(machine: name.lowercased()))
            case "default":
                entries.append(Entry(machine: nil))
            case "login":
                guard let value = tokens.popFirst(), !entries.isEmpty else { return nil }
                entries[entries.count - 1].login = String(value)
            case "password":
                guard let value = tokens.popFirst(), !entries.isEmpty else { return nil }
                entries[entries.count - 1].password = String(value)
            case "account":
                _ = tokens.popFirst()
            case "macdef":
                // A macro runs to the next blank line; its words are no tokens
                // of ours. Rare in files that hold passwords: skip the rest.
                inMacro = true
            default:
                break
            }
            if inMacro { break }
        }
        self.entries = entries
    }

    /// The login and password for `host` (and `user`, when the URL names
    /// one): the first matching machine, else `default`.
    package func credentials(host: String, user: String?) -> (login: String, password: String)? {
        let host = host.lowercased()
        let candidates = entries.filter { $0.machine == host } + entries.filter { $0.machine == nil }
        for entry in candidates {
            guard let password = entry.password else { continue }
            if let user, let login = entry.login, login != user { continue }
            guard let login = user ?? entry.login else { continue }
            return (login, password)
        }
        return nil
    }

    /// `$NETRC`, else ~/.netrc, read; nil when absent or unreadable.
    package static func load() -> Netrc? {
        let path = ProcessInfo.processInfo.environment["NETRC"].flatMap { $0.isEmpty ? nil : $0 }
            ?? SSHOptions.home + "/.netrc"
        guard let data = FileManager.default.contents(atPath: path), data.count <= maxBytes else { return nil }
        return Netrc(text: String(decoding: data, as: UTF8.self))
    }
}
