// Scheme, host and port of a URL: the unit credentials belong to. A redirect
// that changes any of the three reaches another server as far as secrets go
// (http and https on one name, or two ports of one machine, are two servers).
import Foundation
import MediaSupport

public struct HTTPOrigin: Hashable, Sendable {
    /// Lower-cased, `http` or `https`.
    public let scheme: String
    /// Lower-cased; an IPv6 address keeps its brackets, as in a URL.
    public let host: String
    /// The port asked for, or the scheme's default.
    public let port: Int

    /// nil for anything but an http(s) URL with a host and a valid port.
    public init?(url: String) {
        guard let components = URLComponents(string: url),
              let scheme = components.scheme?.lowercased(), let port = Self.defaultPort(scheme),
              let host = components.host?.lowercased(), !host.isEmpty else { return nil }
        if let given = components.port {
            guard (1...65535).contains(given) else { return nil }
            self.port = given
        } else {
            self.port = port
        }
        self.scheme = scheme
        self.host = host
    }

    public static func defaultPort(_ scheme: String) -> Int? {
        switch scheme {
        case "http": return 80
        case "https": return 443
        default: return nil
        }
    }
}
