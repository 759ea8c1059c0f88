// What an SFTP read answered, in the words the loader reads every answer
// in: SFTP has no status line or headers, so the fetcher makes the head a
// ranged HTTP answer would have had (206, `Content-Range: bytes A-B/*`, the
// length libcurl will deliver, and `Last-Modified`: the file's mtime, which
// libcurl stats for it, so a file changed since its listing is told by its
// next read), and an error libcurl ended an SFTP transfer with becomes the
// errno a reader gets. The file's total comes from its directory's
// listing: a range's answer names none.
import CCurl
import MediaSupport
#if canImport(Glibc)
import Glibc
#endif

package enum SFTPHead {
    /// The head of an SFTP transfer of `request` on `easy`, once its first
    /// bytes (or its end) came: 206 for a range, 200 for the whole file.
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
        guard let range = request.range else { return ResponseHead(status: 200, headers: headers) }
        // An empty answer has no range to name; the loader refuses it.
        if length > 0 {
            headers["content-range"] = "bytes \(range.lowerBound)-\(range.lowerBound + length - 1)/*"
        }
        return ResponseHead(status: 206, headers: headers)
    }

    /// The error a read gets for an SFTP transfer libcurl ended with `code`.
    package static func failure(_ code: CURLcode, detail: String) -> MediaError {
        switch code {
        case CURLE_REMOTE_FILE_NOT_FOUND: return MediaError(ENOENT, "no such file (\(detail))")
        case CURLE_REMOTE_ACCESS_DENIED: return MediaError(EACCES, "permission denied (\(detail))")
        case CURLE_LOGIN_DENIED: return MediaError(EACCES, "login refused (\(detail))")
        case CURLE_PEER_FAILED_VERIFICATION:
            return MediaError(EACCES, "host key not verified against known_hosts or not the one verified at mount (\(detail))")
        default: return MediaError(EIO, detail)
        }
    }
}
