// One blocking GET of a small text document (a playlist, a directory
// listing), outside the network thread: used before the daemon detaches,
// when no thread may run yet, and for listings fetched on lookup. It goes
// through CurlHop like every transfer, redirects and credentials included.
import CCurl
#if canImport(Glibc)
import Glibc
#endif

public enum TextFetch {
    /// A playlist or listing larger than this is not a playlist or listing.
    public static let maxBytes = 16 << 20

    private final class Sink {
        var bytes: [UInt8] = []
        var tooLarge = false
    }

    /// The body of `url` as text, or a MediaError naming the URL (without
    /// credentials) and what went wrong. `timeout` bounds all hops together.
    public static func get(_ url: String, options: HTTPOptions, timeout: Int = 30) throws -> String {
        let answer = try response(url, options: options, timeout: timeout)
        guard (200..<300).contains(answer.status) else {
            throw MediaError(ContentProbe.error(for: ResponseHead(status: answer.status, headers: [:])).errno,
                             "\(MediaError.redacted(url)): HTTP \(answer.status)")
        }
        return String(decoding: answer.body, as: UTF8.self)
    }

    /// The last hop's status and body, whatever the status (an S3 error
    /// names its cause in the body).
    public struct Response: Sendable {
        public var status: Int
        public var body: [UInt8]

        public init(status: Int, body: [UInt8]) {
            self.status = status
            self.body = body
        }
    }

    /// The answer to a GET of `url` after its redirects, or a MediaError
    /// when no answer came; `timeout` bounds all hops together.
    public static func response(_ url: String, options: HTTPOptions, timeout: Int = 30) throws -> Response {
        let shown = MediaError.redacted(url)
        let deadline = ContinuousClock.now + .seconds(timeout)
        var hop = try CurlHop(FetchRequest(url: url), options: options)
        while true {
            let sink = Sink()
            let left = max(1, Int((deadline - ContinuousClock.now).components.seconds))
            let code = withExtendedLifetime(sink) { perform(hop, into: sink, timeout: left) }
            if sink.tooLarge { throw MediaError(EFBIG, "\(shown): larger than \(maxBytes >> 20) MiB") }
            guard code == CURLE_OK else {
                throw MediaError.io("\(shown): \(String(cString: curl_easy_strerror(code)))")
            }
            if let next = try hop.next() {
                hop = next
                continue
            }
            return Response(status: hop.status, body: sink.bytes)
        }
    }

    private static func perform(_ hop: CurlHop, into sink: Sink, timeout: Int) -> CURLcode {
        let easy = hop.easy
        _ = mediafs_easy_setopt_long(easy, CURLOPT_TIMEOUT, timeout)
        _ = mediafs_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, Unmanaged.passUnretained(sink).toOpaque())
        _ = mediafs_easy_setopt_data_cb(easy, CURLOPT_WRITEFUNCTION) { ptr, size, count, user in
            let sink = Unmanaged<Sink>.fromOpaque(user!).takeUnretainedValue()
            let length = size * count
            guard sink.bytes.count + length <= TextFetch.maxBytes else { sink.tooLarge = true; return 0 }
            sink.bytes.append(contentsOf: UnsafeRawBufferPointer(start: ptr, count: length))
            return length
        }
        return curl_easy_perform(easy)
    }
}
