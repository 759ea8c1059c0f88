// `--proxy` and `--cacert` as HTTPOptions checks them: what is refused
// before mounting, and that a refusal never shows the proxy's password.
import Foundation
import XCTest
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport
#if canImport(Glibc)
import Glibc
#endif

final class HTTPTransportOptionsTests: XCTestCase {
    private var base = ""

    override func setUpWithError() throws {
        base = try TemporaryDirectory.make("transport")
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: base)
    }

    private func refusal(proxy: String) -> String? {
        do {
            _ = try HTTPOptions.checkedProxy(proxy)
            return nil
        } catch let error as MediaError {
            XCTAssertEqual(error.errno, EINVAL)
            return error.message
        } catch {
            return "\(error)"
        }
    }

    private func refusal(caFile: String) -> MediaError? {
        do {
            _ = try HTTPOptions.checkedCAFile(caFile, relativeTo: base)
            return nil
        } catch {
            return error as? MediaError
        }
    }

    func testProxy_everySchemeLibcurlSpeaks_withOrWithoutPortAndCredentials_isTakenAsGiven() throws {
        for proxy in ["http://proxy.example:3128", "HTTPS://proxy.example", "socks5://127.0.0.1:1080",
                      "socks5h://u:p@[::1]:1080/", "socks4://10.0.0.1:1080", "socks4a://h:9"] {
            XCTAssertEqual(try HTTPOptions.checkedProxy(proxy), proxy)
        }
    }

    func testProxy_withoutScheme_otherScheme_badPort_path_orSpace_isRefused() {
        for proxy in ["proxy:3128", "ftp://proxy:21", "http://proxy:0", "http://proxy:65536", "http://:3128",
                      "http://", "http://proxy:3128/path", "http://proxy:3128?x=1", "http://pro xy:3128",
                      "http://proxy:3128\n"] {
            XCTAssertNotNil(refusal(proxy: proxy), proxy)
        }
    }

    func testProxyRefusal_neverShowsThePassword() throws {
        let message = try XCTUnwrap(refusal(proxy: "ftp://alice:hunter2@proxy:21"))
        XCTAssertFalse(message.contains("hunter2"), message)
        XCTAssertFalse(message.contains("alice"), message)
    }

    func testCAFile_relativePath_holdingACertificate_becomesAbsolute() throws {
        let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
        XCTAssertTrue(FileManager.default.createFile(atPath: "\(base)/ca.pem", contents: Data(pem.utf8)))
        XCTAssertEqual(try HTTPOptions.checkedCAFile("ca.pem", relativeTo: base), "\(base)/ca.pem")
    }

    func testCAFile_missing_aDirectory_empty_orWithoutCertificate_isRefusedNamingIt() throws {
        XCTAssertTrue(FileManager.default.createFile(atPath: "\(base)/empty", contents: Data()))
        XCTAssertTrue(FileManager.default.createFile(atPath: "\(base)/key.pem",
                                                     contents: Data("-----BEGIN PRIVATE KEY-----\n".utf8)))
        XCTAssertEqual(refusal(caFile: "missing.pem")?.errno, ENOENT)
        for path in ["", base, "empty", "key.pem"] {
            let error = try XCTUnwrap(refusal(caFile: path), path)
            XCTAssertEqual(error.errno, EINVAL, path)
            XCTAssertTrue(path.isEmpty || error.message.contains(path), error.message)
        }
    }

    func testCAFile_largerThanAnyBundle_isRefused() throws {
        let path = "\(base)/huge.pem"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data()))
        XCTAssertEqual(truncate(path, off_t(HTTPOptions.maxCAFileBytes + 1)), 0)
        XCTAssertEqual(refusal(caFile: path)?.errno, EINVAL)
    }
}
