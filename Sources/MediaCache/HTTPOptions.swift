// What every request carries besides its range: headers for all hosts
// (`--header`), headers per host (`--config FILE`), and whether credentials
// come from ~/.netrc. Credentials in `user:pass@` URLs are libcurl's to send;
// libcurl sends neither them nor a custom Authorization header to another
// host after a redirect.
import Foundation

public struct HTTPOptions: Sendable, Equatable {
    public var headers: [String] = []
    /// Lower-cased host name → header lines.
    public var hostHeaders: [String: [String]] = [:]
    public var netrc = false

    public init() {}

    /// The header lines for a request to `url`, reached from `origin` (the
    /// URL first asked for) by redirects. A host's headers go to that host
    /// only: not to another host, nor to the same name on another port or
    /// scheme, which is another server as far as credentials go.
    func headers(for url: String, origin: String? = nil) -> [String] {
        guard let target = URLComponents(string: url), let host = target.host?.lowercased() else { return headers }
        if let origin, let first = URLComponents(string: origin), first.host?.lowercased() == host,
           first.port != target.port || first.scheme?.lowercased() != target.scheme?.lowercased() {
            return headers
        }
        return headers + (hostHeaders[host] ?? [])
    }

    /// A `--header` value: `Name: value`, with a token name.
    public static func validHeader(_ line: String) -> Bool {
        guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else { return false }
        let name = line[..<colon]
        return !line.contains("\n") && !line.contains("\r")
            && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_".contains($0)) }
    }

    /// Reads a config file: `[host]` sections of `Name: value` header lines,
    /// `#` comments. Errors name the file and line.
    public mutating func load(config path: String) throws {
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw MediaError(EINVAL, "config file \(path) cannot be read")
        }
        var host: String?
        for (index, raw) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            let line = String(raw.trimmingSpaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            let origin = "\(path):\(index + 1)"
            if line.hasPrefix("[") {
                guard line.hasSuffix("]"), line.count > 2 else { throw MediaError(EINVAL, "\(origin): bad section '\(line)'") }
                host = String(line.dropFirst().dropLast()).trimmingSpaces.lowercased()
            } else if let current = host {
                guard Self.validHeader(line) else {
                    throw MediaError(EINVAL, "\(origin): expected a header line 'Name: value'")
                }
                hostHeaders[current, default: []].append(line)
            } else {
                throw MediaError(EINVAL, "\(origin): header outside a [host] section")
            }
        }
    }
}
