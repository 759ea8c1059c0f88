// Which origins answered over HTTP/2 or later (they multiplex), as this
// process learned from any answer. The mount's playlist and listings are
// fetched (TextFetch) before the daemon's fetcher exists; what they learned
// seeds its admission, so the first wave of transfers to such an origin (a
// VOD's length probes, right after the mount) goes as streams of one
// connection, not 8 connections first. The newest answer of an origin wins.
import CCurl
import MediaSupport

package enum OriginProtocols {
    /// Bounded: past this many origins the set starts again.
    static let maxOrigins = 4096
    private static let multiplexing = Locked(Set<HTTPOrigin>())

    /// The origin that answered on `easy` (a finished transfer) and whether
    /// its answer came over a multiplexing protocol; recorded. nil when
    /// libcurl knows no answer or URL. `asked`: a URL whose origin the
    /// caller parsed already, taken when the answer came from that URL
    /// (no redirect), so the network thread parses no URL per answer.
    @discardableResult
    package static func note(answerOn easy: UnsafeMutableRawPointer,
                            asked: (url: String, origin: HTTPOrigin?)? = nil) -> (origin: HTTPOrigin, multiplexes: Bool)? {
        var version = 0
        var url: UnsafeMutablePointer<CChar>?
        guard mediafs_easy_getinfo_long(easy, CURLINFO_HTTP_VERSION, &version) == CURLE_OK, version != 0,
              mediafs_easy_getinfo_string(easy, CURLINFO_EFFECTIVE_URL, &url) == CURLE_OK, let url else { return nil }
        let answered = String(cString: url)
        guard let origin = asked.flatMap({ $0.url == answered ? $0.origin : nil }) ?? HTTPOrigin(url: answered) else {
            return nil
        }
        let multiplexes = version >= Int(CURL_HTTP_VERSION_2_0)
        multiplexing.withLock { known in
            if multiplexes {
                if known.count >= maxOrigins { known = [] }
                known.insert(origin)
            } else {
                known.remove(origin)
            }
        }
        return (origin, multiplexes)
    }

    /// The origins whose last answer came over HTTP/2 or later.
    package static var known: Set<HTTPOrigin> { multiplexing.withLock { $0 } }

    /// Whether `url`'s origin's last answer came over HTTP/2 or later.
    package static func multiplexes(_ url: String) -> Bool {
        guard let origin = HTTPOrigin(url: url) else { return false }
        return multiplexing.withLock { $0.contains(origin) }
    }
}
