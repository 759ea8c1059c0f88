// How requests reach their servers: the proxy (`--proxy`) and the CA bundle
// that verifies TLS (`--cacert`). Both are checked here, before anything is
// mounted, so a typo fails the command instead of every later read.
import Foundation
#if canImport(Glibc)
import Glibc
import MediaSupport
#endif

extension HTTPOptions {
    /// Proxy schemes libcurl speaks; `socks5h` and `socks4a` resolve names at the proxy.
    package static let proxySchemes: Set<String> = ["http", "https", "socks4", "socks4a", "socks5", "socks5h"]
    /// A CA bundle larger than this is not a CA bundle (Debian's is ~200 KiB).
    package static let maxCAFileBytes = 16 << 20

    /// A `--proxy` value as libcurl will be given it, or an error naming
    /// what is wrong (without the proxy's password). The scheme is required:
    /// libcurl would take `host:port` as http, which hides a meant socks5.
    package static func checkedProxy(_ text: String) throws -> String {
        let shown = MediaError.redacted(text)
        let bad = { (why: String) in MediaError(EINVAL, "--proxy '\(shown)': \(why)") }
        guard !text.contains(where: { $0.isWhitespace || $0.isNewline }) else { throw bad("contains white space") }
        guard let scheme = MediaURL.writtenScheme(of: text) else {
            throw bad("needs a scheme, as in http://proxy.example:3128 or socks5h://127.0.0.1:1080")
        }
        guard proxySchemes.contains(scheme) else {
            throw bad("the scheme must be one of \(proxySchemes.sorted().joined(separator: ", "))")
        }
        // Only the authority matters to libcurl; its host and port as libcurl reads them.
        guard let parsed = MediaURL(text) else {
            throw bad("expected a host and an optional port from 1 to 65535")
        }
        guard parsed.path == "/", parsed.query == nil, parsed.fragment == nil else {
            throw bad("a proxy URL has no path, query or fragment")
        }
        return text
    }

    /// The absolute path of a `--cacert` file that can be read and holds at
    /// least one PEM certificate; absolute because the daemon changes to `/`
    /// when it detaches.
    package static func checkedCAFile(_ path: String, relativeTo directory: String) throws -> String {
        guard !path.isEmpty else { throw MediaError(EINVAL, "--cacert needs a file") }
        let absolute = path.hasPrefix("/") ? path : directory + "/" + path
        let descriptor = open(absolute, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw MediaError.system("--cacert \(path) cannot be read") }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        var info = stat()
        guard fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            throw MediaError(EINVAL, "--cacert \(path) is not a regular file")
        }
        guard info.st_size <= maxCAFileBytes else {
            throw MediaError(EINVAL, "--cacert \(path) is larger than \(maxCAFileBytes >> 20) MiB")
        }
        let data: Data
        do {
            data = try handle.read(upToCount: maxCAFileBytes + 1) ?? Data()
        } catch {
            throw MediaError(EIO, "--cacert \(path) cannot be read: \(error)")
        }
        guard data.count <= maxCAFileBytes,
              data.range(of: Data("-----BEGIN CERTIFICATE-----".utf8)) != nil else {
            throw MediaError(EINVAL, "--cacert \(path) holds no PEM certificate ('-----BEGIN CERTIFICATE-----')")
        }
        return absolute
    }
}
