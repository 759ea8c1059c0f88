// One blocking GET of a small text document (a playlist, a directory
// listing), outside the network thread: used before the daemon detaches,
// when no thread may run yet, and for listings fetched on lookup.
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
    /// credentials) and what went wrong.
    public static func get(_ url: String, options: HTTPOptions, timeout: Int = 30) throws -> String {
        CurlFetcher.initializeLibrary()
        guard let easy = curl_easy_init() else { throw MediaError.io("cannot start a transfer") }
        defer { curl_easy_cleanup(easy) }
        let sink = Sink()
        var headerList: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(headerList) }
        for line in options.headers(for: url) { headerList = curl_slist_append(headerList, line) }
        _ = mediafs_easy_setopt_string(easy, CURLOPT_URL, url)
        _ = mediafs_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        _ = mediafs_easy_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 1)
        _ = mediafs_easy_setopt_long(easy, CURLOPT_MAXREDIRS, 10)
        _ = mediafs_easy_setopt_string(easy, CURLOPT_PROTOCOLS_STR, "http,https")
        _ = mediafs_easy_setopt_string(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
        _ = mediafs_easy_setopt_long(easy, CURLOPT_TIMEOUT, timeout)
        _ = mediafs_easy_setopt_string(easy, CURLOPT_USERAGENT, "mediafs/\(MediaCacheVersion.string)")
        if headerList != nil { _ = mediafs_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, headerList) }
        if options.netrc { _ = mediafs_easy_setopt_long(easy, CURLOPT_NETRC, Int(CURL_NETRC_OPTIONAL.rawValue)) }
        let context = Unmanaged.passUnretained(sink).toOpaque()
        _ = mediafs_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, context)
        _ = mediafs_easy_setopt_data_cb(easy, CURLOPT_WRITEFUNCTION) { ptr, size, count, user in
            let sink = Unmanaged<Sink>.fromOpaque(user!).takeUnretainedValue()
            let length = size * count
            guard sink.bytes.count + length <= TextFetch.maxBytes else { sink.tooLarge = true; return 0 }
            sink.bytes.append(contentsOf: UnsafeRawBufferPointer(start: ptr, count: length))
            return length
        }
        let code = curl_easy_perform(easy)
        let shown = MediaError.redacted(url)
        if sink.tooLarge { throw MediaError(EFBIG, "\(shown): larger than \(maxBytes >> 20) MiB") }
        guard code == CURLE_OK else {
            throw MediaError.io("\(shown): \(String(cString: curl_easy_strerror(code)))")
        }
        var status = 0
        _ = mediafs_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        guard (200..<300).contains(status) else {
            throw MediaError(ContentProbe.error(for: ResponseHead(status: status, headers: [:])).errno,
                             "\(shown): HTTP \(status)")
        }
        return String(decoding: sink.bytes, as: UTF8.self)
    }
}
