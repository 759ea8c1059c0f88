// Scheme, host and port of a URL: the unit credentials belong to. A redirect
// that changes any of the three reaches another server as far as secrets go
// (http and https on one name, or two ports of one machine, are two servers).
import Foundation
import MediaSupport

package struct HTTPOrigin: Hashable, Sendable {
    /// Lower-cased, `http`, `https`, `sftp`, `ftp` or `ftps` (an SFTP or
    /// FTP server's reads run through the same fetcher, counted per origin
    /// as any).
    package let scheme: String
    /// Lower-cased; an IPv6 address keeps its brackets, as in a URL.
    package let host: String
    /// The port asked for, or the scheme's default.
    package let port: Int

    /// nil for anything but an http(s), sftp or ftp(s) URL with a host and a valid port,
    /// as libcurl parses it (MediaURL): the parts it will connect to.
    package init?(url: String) {
        guard let parsed = MediaURL(url) else { return nil }
        self.init(parsed)
    }

    package init?(_ url: MediaURL) {
        guard url.isHTTP || ["sftp", "ftp", "ftps"].contains(url.scheme), let port = url.effectivePort else { return nil }
        scheme = url.scheme
        host = url.host
        self.port = port
    }

    package static func defaultPort(_ scheme: String) -> Int? {
        scheme == "http" || scheme == "https" ? MediaURL.defaultPort(scheme) : nil
    }
}
