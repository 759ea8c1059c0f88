// One blocking request for a small document (a playlist, a directory
// listing, a WebDAV multistatus), outside the network thread: used before
// the daemon detaches, when no thread may run yet, and for listings fetched
// on lookup. It goes through CurlHop like every transfer, redirects and
// credentials included; the caller judges the final status.
import CCurl
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import MediaSupport
import MediaStore
import MediaNetwork

package enum TextFetch {
    /// A playlist or listing larger than this is not a playlist or listing.
    package static let maxBytes = 16 << 20

    /// The last hop's answer: its status and body, and its headers (names
    /// lower-cased) where the fetch kept them (QueuedFetch does).
    package struct Answer: Sendable {
        package var status: Int
        package var body: Data
        package var headers: [String: String]

        package init(status: Int, body: Data, headers: [String: String] = [:]) {
            self.status = status
            self.body = body
            self.headers = headers
        }
    }

    private final class Sink {
        let limit: Int
        var bytes = Data()
        var tooLarge = false

        init(limit: Int) { self.limit = limit }
    }

    /// The body of `url` as text, or a MediaError naming the URL (without
    /// credentials) and what went wrong. `timeout` bounds all hops together.
    package static func get(_ url: String, options: HTTPOptions, clock: Clock, timeout: Int = 30) throws -> String {
        let answer = try fetch(FetchRequest(url: url), options: options, clock: clock, timeout: timeout)
        guard (200..<300).contains(answer.status) else {
            throw MediaError(ResponseHead(status: answer.status, headers: [:]).failure.errno,
                             "\(MediaError.redacted(url)): HTTP \(answer.status)")
        }
        return String(decoding: answer.body, as: UTF8.self)
    }

    /// The answer to `request` after its redirects, whatever its status;
    /// a MediaError naming the URL when there is none (no connection, a
    /// timeout, a body over `maxBytes`, a redirect refused).
    package static func fetch(_ request: FetchRequest, options: HTTPOptions, clock: Clock, timeout: Int = 30,
                             maxBytes: Int = maxBytes) throws -> Answer {
        let shown = MediaError.redacted(request.url)
        let deadline = Deadline.after(seconds: Double(timeout), clock: clock)
        var hop = try CurlHop(request, options: options)
        while true {
            let sink = Sink(limit: maxBytes)
            let left = max(1, Int(deadline.remaining))
            let code = withExtendedLifetime(sink) { perform(hop, into: sink, timeout: left) }
            if sink.tooLarge { throw MediaError(EFBIG, "\(shown): larger than \(maxBytes >> 20) MiB") }
            // An MLSD the server refuses (500-504: a server without it) is
            // its answer, for the caller to list another way.
            let refusedCommand = code == CURLE_FTP_COULDNT_RETR_FILE && hop.request.method == .mlsd
                && (500...504).contains(hop.status)
            guard code == CURLE_OK || refusedCommand else {
                throw MediaError.io("\(shown): \(String(cString: curl_easy_strerror(code)))")
            }
            if let next = try hop.next() {
                hop = next
                continue
            }
            return Answer(status: hop.status, body: sink.bytes)
        }
    }

    private static func perform(_ hop: CurlHop, into sink: Sink, timeout: Int) -> CURLcode {
        let easy = hop.easy
        _ = mediafs_easy_setopt_long(easy, CURLOPT_TIMEOUT, timeout)
        _ = mediafs_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, Unmanaged.passUnretained(sink).toOpaque())
        _ = mediafs_easy_setopt_data_cb(easy, CURLOPT_WRITEFUNCTION) { ptr, size, count, user in
            let sink = Unmanaged<Sink>.fromOpaque(user!).takeUnretainedValue()
            let length = size * count
            guard sink.bytes.count + length <= sink.limit else { sink.tooLarge = true; return 0 }
            sink.bytes.append(UnsafeBufferPointer(start: ptr.map { UnsafeRawPointer($0).assumingMemoryBound(to: UInt8.self) },
                                                  count: length))
            return length
        }
        if hop.request.method == .list {
            // Each entry libcurl's LIST parser read, as an MLSD line; no
            // file is fetched.
            _ = mediafs_easy_setopt_pointer(easy, CURLOPT_CHUNK_DATA, Unmanaged.passUnretained(sink).toOpaque())
            _ = mediafs_easy_setopt_chunk_bgn(easy) { info, user, _ in
                let sink = Unmanaged<Sink>.fromOpaque(user!).takeUnretainedValue()
                let entry = info!.assumingMemoryBound(to: curl_fileinfo.self).pointee
                guard let line = FTPDirectory.mlsdLine(of: entry) else { return mediafs_chunk_skip }
                guard sink.bytes.count + line.utf8.count <= sink.limit else {
                    sink.tooLarge = true
                    return Int(CURL_CHUNK_BGN_FUNC_FAIL)
                }
                sink.bytes.append(contentsOf: Array(line.utf8))
                return mediafs_chunk_skip
            }
        }
        let code = curl_easy_perform(easy)
        // Whether the origin multiplexes: the daemon's fetcher starts from it.
        if code == CURLE_OK { OriginProtocols.note(answerOn: easy) }
        return code
    }
}
