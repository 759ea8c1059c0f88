// A directory of an FTP server (`ftp://`, explicit TLS as `--ftp-tls`
// says; `ftps://`, implicit TLS) listed with one MLSD through TextFetch
// (libcurl, like every request): subdirectories are directories, files
// carry the size and time MLSD gives, so `ls -l` sends nothing more.
// Files are read by the fetcher (REST and RETR), at most three at once per
// server (TransferAdmission), as FTP servers allow a user. A server
// without MLSD is an error that says so: LIST's `ls -l` text has no
// seconds and no time zone.
import CCurl
import Foundation
import MediaSupport
import MediaStore
import MediaNetwork

package struct FTPDirectory: URLListing {
    /// The directory's URL, ending in `/`; `user:pass@` kept.
    package let url: String

    package init(url: String) {
        self.url = url
    }

    /// An MLSD answer larger than this is refused: some 200,000 entries.
    package static let maxAnswerBytes = 32 << 20

    package static func isFTP(_ url: String) -> Bool {
        let scheme = MediaURL.writtenScheme(of: url)
        return scheme == "ftp" || scheme == "ftps"
    }

    package func list(in context: ListingContext) throws -> [Source] {
        let answer: TextFetch.Answer
        do {
            answer = try context.fetch(FetchRequest(url: url, method: .mlsd), Self.maxAnswerBytes)
        } catch let error as MediaError {
            // libcurl's own words for "no TLS offered", as TextFetch passes them on.
            if error.message.contains(String(cString: curl_easy_strerror(CURLE_USE_SSL_FAILED))) {
                throw MediaError(EACCES, "\(error.message): the server offers no TLS, which --ftp-tls required (the "
                                 + "default) asks for before the password; --ftp-tls off sends it in clear")
            }
            throw MediaError(error.errno, "\(error.message) (listed with MLSD; a server without it cannot be listed)")
        }
        guard (200..<300).contains(answer.status) else {
            throw MediaError.io("\(origin): FTP \(answer.status) to MLSD")
        }
        return sources(of: MLSDEntry.entries(String(decoding: answer.body, as: UTF8.self)))
    }

    /// The sources of a directory's entries, in the server's order.
    func sources(of entries: [MLSDEntry]) -> [Source] {
        var sources: [Source] = []
        for entry in entries {
            switch entry.kind {
            case .directory:
                let child = url + SFTPDirectory.encoded(entry.name) + "/"
                sources.append(Source(name: entry.name, url: child, kind: .directory(FTPDirectory(url: child))))
            case .file:
                guard let size = entry.size else { continue }
                let date = entry.modified.flatMap(HTTPDate.text(seconds:))
                sources.append(Source(name: entry.name, url: url + SFTPDirectory.encoded(entry.name),
                                      kind: .file(ContentInfo(length: size, lastModified: date, acceptsRanges: true))))
            case .other:
                continue
            }
        }
        return sources
    }
}
