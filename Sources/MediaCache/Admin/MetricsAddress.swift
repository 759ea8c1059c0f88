// The `--metrics ADDR:PORT` value: a numeric IPv4 address, a bracketed
// IPv6 one, or `localhost`, and a port from 1 to 65535. Names other than
// localhost are refused, so the listener never depends on a resolver.
#if canImport(Glibc)
import Glibc
import MediaSupport
#endif

public struct MetricsAddress: Sendable, Equatable, CustomStringConvertible {
    public enum Family: Sendable { case ipv4, ipv6 }
    public let host: String
    public let port: UInt16
    public let family: Family

    /// nil for anything but `HOST:PORT` as above.
    public init?(_ text: String) {
        guard let colon = text.lastIndex(of: ":") else { return nil }
        var host = String(text[..<colon])
        let portText = text[text.index(after: colon)...]
        guard let port = Limits.length(portText), (1...65_535).contains(port) else { return nil }
        if host.hasPrefix("[") && host.hasSuffix("]") && host.count > 2 {
            host = String(host.dropFirst().dropLast())
            var probe = in6_addr()
            guard inet_pton(AF_INET6, host, &probe) == 1 else { return nil }
            family = .ipv6
        } else {
            if host == "localhost" { host = "127.0.0.1" }
            var probe = in_addr()
            guard inet_pton(AF_INET, host, &probe) == 1 else { return nil }
            family = .ipv4
        }
        self.host = host
        self.port = UInt16(port)
    }

    public var description: String { family == .ipv6 ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// Whether only this machine can connect.
    public var isLoopback: Bool {
        family == .ipv6 ? host == "::1" : host.hasPrefix("127.")
    }
}
