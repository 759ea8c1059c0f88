// A directory of an FTP server (`ftp://`, explicit TLS as `--ftp-tls`
// says; `ftps://`, implicit TLS) listed with one MLSD through TextFetch
// (libcurl, like every request): subdirectories are directories, files
// carry the size and time MLSD gives, so `ls -l` sends nothing more.
// Files are read by the fetcher (REST and RETR), at most three at once per
// server (TransferAdmission), as FTP servers allow a user. A server
// without MLSD (vsftpd has none) is listed with LIST, read by libcurl's
// own parser (Unix `ls -l` and Windows forms). LIST's times are to the
// minute at best (the day past six months), in the server's unknown time
// zone: no validator. Its files are known by their length alone until the
// first read's answer (MDTM) names the version, as for an nginx index
// (decision 0038). Such a server is remembered, so later listings send
// LIST alone.
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

    /// Origins whose server refused MLSD: listed with LIST from then on.
    private static let withoutMLSD = Locked<Set<String>>([])

    package func list(in context: ListingContext) throws -> [Source] {
        var method: FetchRequest.Method = Self.withoutMLSD.withLock { $0.contains(server) } ? .list : .mlsd
        var answer = try fetch(method, in: context)
        if method == .mlsd && (500...504).contains(answer.status) {
            Log.info("\(origin): the server has no MLSD (FTP \(answer.status)): listed with LIST, by length until "
                     + "a file's first read")
            Self.withoutMLSD.withLock { _ = $0.insert(server) }
            method = .list
            answer = try fetch(method, in: context)
        }
        // A wildcard transfer whose every file was skipped ends with no
        // response code of its own: libcurl's success is the LIST's.
        guard (200..<300).contains(answer.status) || (method == .list && answer.status == 0) else {
            throw MediaError.io("\(origin): FTP \(answer.status) to \(method.rawValue)")
        }
        return sources(of: MLSDEntry.entries(String(decoding: answer.body, as: UTF8.self)))
    }

    /// `scheme://host:port` of the directory, without credentials: whom a
    /// refused MLSD is remembered for.
    private var server: String {
        let shown = MediaError.redacted(url)
        guard let start = shown.range(of: "://") else { return shown }
        return String(shown[..<(shown[start.upperBound...].firstIndex(of: "/") ?? shown.endIndex)])
    }

    private func fetch(_ method: FetchRequest.Method, in context: ListingContext) throws -> TextFetch.Answer {
        do {
            return try context.fetch(FetchRequest(url: url, method: method), Self.maxAnswerBytes)
        } catch let error as MediaError {
            // libcurl's own words for "no TLS offered", as TextFetch passes them on.
            if error.message.contains(String(cString: curl_easy_strerror(CURLE_USE_SSL_FAILED))) {
                throw MediaError(EACCES, "\(error.message): the server offers no TLS, which --ftp-tls required (the "
                                 + "default) asks for before the password; --ftp-tls off sends it in clear")
            }
            throw MediaError(error.errno, "\(error.message) (listed with \(method.rawValue))")
        }
    }

    /// An entry libcurl's LIST parser read, as an MLSD line (`type`, `size`
    /// when known, then the name; no time, see above), so one reader reads
    /// both; nil for `.`, `..` and a name no line can carry.
    static func mlsdLine(of entry: curl_fileinfo) -> String? {
        guard let pointer = entry.filename else { return nil }
        let name = String(cString: pointer)
        guard !name.isEmpty, name != ".", name != "..", !name.contains(where: { $0 == "\r" || $0 == "\n" }) else {
            return nil
        }
        var facts: String
        switch entry.filetype {
        case CURLFILETYPE_FILE: facts = "type=file;"
        case CURLFILETYPE_DIRECTORY: facts = "type=dir;"
        default: facts = "type=other;"
        }
        if entry.flags & UInt32(CURLFINFOFLAG_KNOWN_SIZE) != 0, entry.size >= 0 { facts += "size=\(entry.size);" }
        return facts + " " + name + "\r\n"
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
