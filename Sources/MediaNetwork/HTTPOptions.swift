// What every request carries besides its range: headers for all hosts
// (`--header`), headers per host (`--config FILE`), whether credentials
// come from ~/.netrc, the proxy, the CA bundle, S3 signing and SSH; and which of them a
// redirect hop may carry (CurlHop asks here, for every hop of every request).
import Foundation
import MediaSupport

public struct HTTPOptions: Sendable, Equatable {
    /// A `[host]` (any port) or `[host:port]` section of the config file.
    package struct Section: Sendable, Equatable {
        /// Lower-cased, as `HTTPOrigin.host` spells it (IPv6 in brackets).
        package var host: String
        /// nil: any port of the host.
        package var port: Int?
        package var headers: [String]

        func matches(_ origin: HTTPOrigin) -> Bool {
            host == origin.host && (port == nil || port == origin.port)
        }
    }

    package var headers: [String] = []
    package var sections: [Section] = []
    package var netrc = false
    /// `--proxy`: every hop goes through it, in place of the proxy the
    /// environment names (http_proxy, https_proxy, all_proxy); no_proxy
    /// still applies. nil: libcurl reads the environment.
    package var proxy: String?
    /// `--cacert`: an absolute path of PEM CAs that verify servers and an
    /// https proxy. nil: libcurl's default bundle.
    package var caFile: String?
    /// The S3 endpoints' origins (`s3://` sources): their requests signed.
    package var s3Origins: [S3Origin] = []
    /// How `sftp://` requests authenticate and verify their host.
    package var ssh = SSHOptions()
    /// `--ftp-tls`: TLS on `ftp://` (`ftps://` is TLS from the start).
    package var ftpTLS = FTPSecurity.required

    /// Header names that carry credentials: a `--header` line naming one
    /// goes to the origin of the URL asked for only, like a section's lines.
    package static let credentialHeaders: Set<String> = ["authorization", "cookie", "proxy-authorization"]

    public init() {}

    /// The header lines for a request to `url`, reached by redirects from
    /// `first` (the URL asked for). At the first URL's origin: every
    /// `--header` line and the lines of the sections matching it. At any
    /// other origin: only the `--header` lines that carry no credentials; no
    /// section's lines, not even one naming that other host, since the
    /// server that redirected chose where they would go.
    package func headers(for url: String, first: String) -> [String] {
        // Most mounts set none: then no URL need be parsed, per request.
        guard !headers.isEmpty || !sections.isEmpty else { return [] }
        guard let origin = Self.sameOrigin(url, first) else {
            return headers.filter { !Self.carriesCredentials($0) }
        }
        return headers + sections.filter { $0.matches(origin) }.flatMap(\.headers)
    }

    /// Whether ~/.netrc is consulted for a request to `url` reached from
    /// `first`: libcurl looks a hop's host up by name alone, so another
    /// port or scheme of the same name would get the entry too.
    package func usesNetrc(for url: String, first: String) -> Bool {
        netrc && Self.sameOrigin(url, first) != nil
    }

    /// The origin of `url` when it is that of `first`; nil otherwise.
    package static func sameOrigin(_ url: String, _ first: String) -> HTTPOrigin? {
        // A first hop is its own origin: parsed once, not twice.
        guard let origin = HTTPOrigin(url: url), url == first || origin == HTTPOrigin(url: first) else { return nil }
        return origin
    }

    package static func carriesCredentials(_ line: String) -> Bool {
        let name = line.prefix { $0 != ":" }.trimmingSpaces.lowercased()
        return credentialHeaders.contains(name)
    }

    /// A `--header` value: `Name: value`, with a token name.
    package static func validHeader(_ line: String) -> Bool {
        guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else { return false }
        let name = line[..<colon]
        return !line.contains("\n") && !line.contains("\r")
            && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_".contains($0)) }
    }

    /// Reads a config file: `[host]`, `[host:port]`, `[[v6addr]]` or
    /// `[[v6addr]:port]` sections of `Name: value` header lines, `#`
    /// comments. Errors name the file and line.
    package mutating func load(config path: String) throws {
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw MediaError(EINVAL, "config file \(path) cannot be read")
        }
        var current: Int?
        for (index, raw) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            let line = String(raw.trimmingSpaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            let origin = "\(path):\(index + 1)"
            if line.hasPrefix("[") {
                guard line.hasSuffix("]"), line.count > 2 else { throw MediaError(EINVAL, "\(origin): bad section '\(line)'") }
                let (host, port) = try Self.section(String(line.dropFirst().dropLast()), origin: origin)
                if let known = sections.firstIndex(where: { $0.host == host && $0.port == port }) {
                    current = known
                } else {
                    sections.append(Section(host: host, port: port, headers: []))
                    current = sections.count - 1
                }
            } else if let current {
                guard Self.validHeader(line) else {
                    throw MediaError(EINVAL, "\(origin): expected a header line 'Name: value'")
                }
                sections[current].headers.append(line)
            } else {
                throw MediaError(EINVAL, "\(origin): header outside a [host] section")
            }
        }
    }

    /// The host and port a section names: `host`, `host:port`, `[v6]` or
    /// `[v6]:port`. A host is taken only if a URL would spell it the same
    /// way, so a section that could never match is refused, not ignored.
    package static func section(_ text: String, origin: String) throws -> (host: String, port: Int?) {
        let name = text.trimmingSpaces.lowercased()
        let bad = { (why: String) in MediaError(EINVAL, "\(origin): bad section '[\(name)]': \(why)") }
        var host = name[...]
        var portText: Substring?
        if name.hasPrefix("[") {
            guard let close = name.firstIndex(of: "]") else { throw bad("an IPv6 address needs its closing ']'") }
            host = name[...close]
            let rest = name[name.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":") else { throw bad("expected ':port' after the IPv6 address") }
                portText = rest.dropFirst()
            }
        } else if let colon = name.firstIndex(of: ":") {
            host = name[..<colon]
            portText = name[name.index(after: colon)...]
            if portText!.contains(":") {
                throw bad("write an IPv6 address in brackets, as in a URL: [[::1]] or [[::1]:8080]")
            }
        }
        var port: Int?
        if let portText {
            guard portText.count <= 5, portText.allSatisfy({ $0.isASCII && $0.isNumber }), let number = Int(portText),
                  (1...65535).contains(number) else {
                throw bad("the port must be a number from 1 to 65535")
            }
            port = number
        }
        guard !host.isEmpty, HTTPOrigin(url: "http://\(host)/")?.host == String(host) else {
            throw bad("not a host name or address")
        }
        return (String(host), port)
    }
}
