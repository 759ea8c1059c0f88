import Foundation
import XCTest
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport
#if canImport(Glibc)
import Glibc
#endif

final class HTTPOptionsTests: XCTestCase {
    private var base = ""

    override func setUpWithError() throws {
        base = try TemporaryDirectory.make("httpoptions")
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: base)
    }

    private func options(config text: String) throws -> HTTPOptions {
        let path = "\(base)/mediafs.conf"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(text.utf8)))
        var options = HTTPOptions()
        try options.load(config: path)
        return options
    }

    // MARK: sections

    func testHostSection_matchesEveryPortAndScheme_hostPortSection_thatPortOnly() throws {
        let options = try options(config: "[media.example]\nX-Any: 1\n[media.example:8443]\nX-Port: 2\n")
        for url in ["http://media.example/a", "https://media.example:9000/a", "http://MEDIA.example:80/a"] {
            XCTAssertEqual(options.headers(for: url, first: url), ["X-Any: 1"], url)
        }
        XCTAssertEqual(options.headers(for: "https://media.example:8443/a", first: "https://media.example:8443/a"),
                       ["X-Any: 1", "X-Port: 2"])
    }

    func testHostPortSection_matchesTheSchemesDefaultPort() throws {
        let options = try options(config: "[media.example:443]\nX-Tls: 1\n")
        XCTAssertEqual(options.headers(for: "https://media.example/a", first: "https://media.example/a"), ["X-Tls: 1"])
        XCTAssertEqual(options.headers(for: "http://media.example/a", first: "http://media.example/a"), [])
    }

    func testIPv6Sections_inBracketsWithOrWithoutAPort() throws {
        let options = try options(config: "[[::1]]\nX-Any: 1\n[[::1]:8080]\nX-Port: 2\n")
        XCTAssertEqual(options.sections.map(\.host), ["[::1]", "[::1]"])
        XCTAssertEqual(options.sections.map(\.port), [nil, 8080])
        XCTAssertEqual(options.headers(for: "http://[::1]:8080/a", first: "http://[::1]:8080/a"), ["X-Any: 1", "X-Port: 2"])
        XCTAssertEqual(options.headers(for: "http://[::1]/a", first: "http://[::1]/a"), ["X-Any: 1"])
    }

    func testRepeatedSection_addsToTheFirst() throws {
        let options = try options(config: "[a.example]\nX-One: 1\n[b.example]\nX-B: b\n[A.example]\nX-Two: 2\n")
        XCTAssertEqual(options.sections.count, 2)
        XCTAssertEqual(options.headers(for: "http://a.example/", first: "http://a.example/"), ["X-One: 1", "X-Two: 2"])
    }

    func testSectionsThatCouldNeverMatch_areRefusedNamingTheLine() {
        let cases = ["[a.example:0]": "port", "[a.example:65536]": "port", "[a.example:+80]": "port",
                     "[a.example:]": "port", "[::1]": "brackets", "[[::1]": "closing", "[[::1]x]": "':port'",
                     "[a b]": "not a host", "[u@a.example]": "not a host", "[a.example/x]": "not a host",
                     "[ ]": "not a host"]
        for (section, why) in cases {
            XCTAssertThrowsError(try options(config: "# c\n\(section)\nX-A: 1\n"), section) { error in
                XCTAssertEqual((error as? MediaError)?.errno, EINVAL, section)
                XCTAssertTrue("\(error)".contains("mediafs.conf:2"), "\(section): \(error)")
                XCTAssertTrue("\(error)".contains(why), "\(section): \(error)")
            }
        }
    }

    // MARK: what a redirect hop carries

    func testHopToAnotherOrigin_getsOnlyTheHeadersWithoutCredentials() throws {
        var options = try options(config: "[a.example]\nX-Key: k\n[b.example]\nX-B: b\n")
        options.headers = ["Authorization: Bearer t", "cookie: c=1", "Proxy-Authorization: Basic p", "X-Plain: 1"]
        let first = "https://a.example/f"
        XCTAssertEqual(options.headers(for: first, first: first), options.headers + ["X-Key: k"])
        for hop in ["https://b.example/f", "http://a.example/f", "https://a.example:8443/f", "ftp://a.example/f"] {
            XCTAssertEqual(options.headers(for: hop, first: first), ["X-Plain: 1"], hop)
        }
        XCTAssertEqual(options.headers(for: "https://A.EXAMPLE:443/other", first: first),
                       options.headers + ["X-Key: k"])
    }

    func testNetrc_isConsultedForTheFirstOriginOnly() {
        var options = HTTPOptions()
        options.netrc = true
        XCTAssertTrue(options.usesNetrc(for: "https://a.example/x", first: "https://a.example:443/f"))
        XCTAssertFalse(options.usesNetrc(for: "http://a.example/x", first: "https://a.example/f"))
        XCTAssertFalse(options.usesNetrc(for: "https://b.example/x", first: "https://a.example/f"))
        options.netrc = false
        XCTAssertFalse(options.usesNetrc(for: "https://a.example/x", first: "https://a.example/f"))
    }

    func testUserinfo_goesBackToTheFirstOriginAndNowhereElse() {
        let first = "https://u:p@a.example/f"
        XCTAssertEqual(CurlHop.credentialed(MediaURL("https://a.example/g")!, first: first), "https://u:p@a.example/g")
        XCTAssertEqual(CurlHop.credentialed(MediaURL("https://x:y@b.example/g")!, first: first), "https://b.example/g")
        XCTAssertEqual(CurlHop.credentialed(MediaURL("http://a.example/g")!, first: first), "http://a.example/g")
        XCTAssertEqual(CurlHop.credentialed(MediaURL("https://A.EXAMPLE:443/g")!, first: first), "https://u:p@A.EXAMPLE:443/g")
        // Where libcurl reads the host, not where a string search would.
        XCTAssertEqual(CurlHop.credentialed(MediaURL("https://b.example/g?@a.example")!, first: first),
                       "https://b.example/g?@a.example")
    }

    func testOrigin_ofAnythingButAnHTTPSFTPOrFTPURLWithAHost_isNil() {
        XCTAssertEqual(HTTPOrigin(url: "sftp://a.example/")?.port, 22)
        XCTAssertEqual(HTTPOrigin(url: "ftp://a.example/")?.port, 21)
        XCTAssertEqual(HTTPOrigin(url: "ftps://a.example/")?.port, 990)
        for url in ["gopher://a.example/", "file:///etc/passwd", "http://a.example:0/", "http://a.example:70000/",
                    "not a url", "dav://a.example/"] {
            XCTAssertNil(HTTPOrigin(url: url), url)
        }
        // libcurl connects "http:///x" to host x: its origin says so.
        XCTAssertEqual(HTTPOrigin(url: "http:///x")?.host, "x")
        XCTAssertEqual(HTTPOrigin(url: "HTTPS://A.example/x")?.port, 443)
    }
}
