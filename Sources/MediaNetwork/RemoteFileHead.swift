// What a read of a file over SFTP or FTP answered, in the words the loader
// reads every answer in: neither has HTTP's status line and headers, so
// the fetcher makes the head a ranged HTTP answer would have had (206,
// `Content-Range: bytes A-B/*`, the length libcurl will deliver, and
// `Last-Modified`: the file's mtime, which libcurl asks for (an SFTP stat,
// FTP's MDTM), so a file changed since its listing is told by its next
// read), 200 with the length for the whole file or a HEAD; and an error
// libcurl ended such a transfer with becomes the errno a reader gets. The
// file's total comes from its directory's listing: a range's answer names
// none.
import CCurl
import MediaSupport
#if canImport(Glibc)
import Glibc
#endif

package enum RemoteFileHead {
    /// The head of an SFTP or FTP transfer of `request` on `easy`, once its
    /// first bytes (or its end) came: 206 for a range, 200 for the whole
    /// file or a HEAD.
    package static func head(for request: FetchRequest, on easy: UnsafeMutableRawPointer) -> ResponseHead {
        var length: curl_off_t = -1
        _ = mediafs_easy_getinfo_off_t(easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length)
        var mtime: curl_off_t = -1
        _ = mediafs_easy_getinfo_off_t(easy, CURLINFO_FILETIME_T, &mtime)
        return head(for: request, length: Int64(length), mtime: mtime >= 0 ? Int64(mtime) : nil)
    }

    package static func head(for request: FetchRequest, length: Int64, mtime: Int64?) -> ResponseHead {
        var headers = ["accept-ranges": "bytes"]
        if let date = mtime.flatMap(HTTPDate.text(seconds:)) { headers["last-modified"] = date }
        guard length >= 0, Limits.isLength(length) else { return ResponseHead(status: 200, headers: headers) }
        headers["content-length"] = String(length)
        guard let range = request.range, request.method != .head else { return ResponseHead(status: 200, headers: headers) }
        // An empty answer has no range to name; the loader refuses it.
        if length > 0 {
            headers["content-range"] = "bytes \(range.lowerBound)-\(range.lowerBound + length - 1)/*"
        }
        return ResponseHead(status: 206, headers: headers)
    }

    /// The error a read gets for an SFTP or FTP transfer libcurl ended with `code`.
    package static func failure(_ code: CURLcode, detail: String) -> MediaError {
        switch code {
        case CURLE_REMOTE_FILE_NOT_FOUND: return MediaError(ENOENT, "no such file (\(detail))")
        case CURLE_REMOTE_ACCESS_DENIED: return MediaError(EACCES, "permission denied (\(detail))")
        case CURLE_LOGIN_DENIED: return MediaError(EACCES, "login refused (\(detail))")
        case CURLE_PEER_FAILED_VERIFICATION:
            return MediaError(EACCES, "host key not verified against known_hosts or not the one verified at mount (\(detail))")
        case CURLE_USE_SSL_FAILED:
            return MediaError(EACCES, "the server offers no TLS, which --ftp-tls required asks for (\(detail))")
        default: return MediaError(EIO, detail)
        }
    }
}
