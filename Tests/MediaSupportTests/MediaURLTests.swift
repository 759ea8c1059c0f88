// MediaURL is libcurl's parse: these pin what the rest of mediafs relies on
// (parts, normalising, resolving, credentials), so a libcurl that read
// URLs differently would fail here, not in a credential sent astray.
import XCTest
@testable import MediaSupport
@testable import MediaTestSupport

final class MediaURLTests: XCTestCase {
    func testParts_areLibcurlsReading_hostAndSchemeLowerCased_restAsWritten() throws {
        let url = try XCTUnwrap(MediaURL("HTTP://User:Pa%40ss@Example.COM:8080/a/b%20c?x=1&y#frag"))
        XCTAssertEqual(url.scheme, "http")
        XCTAssertEqual(url.user, "User")
        XCTAssertEqual(url.password, "Pa%40ss")
        XCTAssertEqual(url.host, "example.com")
        XCTAssertEqual(url.port, 8080)
        XCTAssertEqual(url.effectivePort, 8080)
        XCTAssertEqual(url.path, "/a/b%20c")
        XCTAssertEqual(url.query, "x=1&y")
        XCTAssertEqual(url.fragment, "frag")
        XCTAssertEqual(url.lastPathSegment, "b%20c")
    }

    func testDefaults_aBareHostHasPathSlash_andTheSchemesPort() throws {
        let url = try XCTUnwrap(MediaURL("https://media.example"))
        XCTAssertEqual(url.path, "/")
        XCTAssertNil(url.port)
        XCTAssertEqual(url.effectivePort, 443)
        XCTAssertNil(url.user)
        XCTAssertEqual(url.text, "https://media.example/")
        XCTAssertEqual(MediaURL("http://[::1]:8080/x")?.host, "[::1]")
        XCTAssertEqual(MediaURL("dav://nas.local/films/")?.effectivePort, 80)
        XCTAssertEqual(MediaURL("s3://bucket/prefix/")?.host, "bucket")
    }

    func testWhatIsNoURL_isNil() {
        for text in ["example.com/film.mkv", "/etc/films.list", "films.m3u", "", "http://",
                     "http://h:0/", "http://h:65536/", "http://h:port/", "http://a b/", "http://h/a b",
                     "http://h/\u{1}"] {
            XCTAssertNil(MediaURL(text), text)
            XCTAssertFalse(MediaURL.isURL(text), text)
        }
        // libcurl's leniency, pinned: three slashes still name a host.
        XCTAssertEqual(MediaURL("http:///x")?.host, "x")
        XCTAssertNil(MediaURL("http://h/" + String(repeating: "a", count: MediaURL.maxBytes)))
    }

    func testResolving_followsRFC3986_asLibcurlResolvesALocation() throws {
        let base = try XCTUnwrap(MediaURL("http://h:81/a/b/list.m3u8?token=1"))
        XCTAssertEqual(base.resolving("seg1.ts")?.text, "http://h:81/a/b/seg1.ts")
        XCTAssertEqual(base.resolving("../x/seg.ts")?.text, "http://h:81/a/x/seg.ts")
        XCTAssertEqual(base.resolving("/root.ts")?.text, "http://h:81/root.ts")
        XCTAssertEqual(base.resolving("//other/x")?.text, "http://other/x")
        XCTAssertEqual(base.resolving("https://o.example/y?q")?.text, "https://o.example/y?q")
        XCTAssertEqual(base.resolving("seg.ts?k=v")?.query, "k=v")
    }

    func testCredentials_areSetAndRemovedThroughLibcurl() throws {
        let url = try XCTUnwrap(MediaURL("http://other.example/x"))
        let with = try XCTUnwrap(url.withCredentials(user: "me", password: "s%3Acret"))
        // libcurl writes the escape's hex digits in lower case; the same bytes.
        XCTAssertEqual(with.text.lowercased(), "http://me:s%3acret@other.example/x")
        XCTAssertEqual(with.host, "other.example")
        XCTAssertEqual(with.withoutCredentials, url)
        XCTAssertEqual(MediaURL("http://a:b@h/")?.withoutCredentials.text, "http://h/")
    }

    func testTheAuthority_endsAtTheFirstSlashQuestionMarkOrHash_soAHostCannotHideInTheUserinfo() throws {
        // Where libcurl says the host is, credentials go: these are the
        // splits a hand-written parser could get wrong.
        XCTAssertEqual(MediaURL("http://good.example#@evil.example/")?.host, "good.example")
        XCTAssertEqual(MediaURL("http://good.example?@evil.example/")?.host, "good.example")
        XCTAssertEqual(MediaURL("http://user@evil.example/")?.host, "evil.example")
    }

    func testADocumentsReference_isEncodedAsABrowserWould_andABrokenEscapeRefused() throws {
        // The forms Foundation gave these before MediaURL (a playlist's
        // lines, an index's hrefs): the same bytes reach the server.
        let base = try XCTUnwrap(MediaURL("http://h/dir/list.m3u"))
        XCTAssertEqual(base.resolving("a b.mp3")?.text, "http://h/dir/a%20b.mp3")
        XCTAssertEqual(base.resolving("é.mp3")?.text, "http://h/dir/%C3%A9.mp3")
        XCTAssertEqual(base.resolving("x%20y.mp3")?.text, "http://h/dir/x%20y.mp3")
        XCTAssertEqual(base.resolving("a|b.mp3")?.text, "http://h/dir/a%7Cb.mp3")
        XCTAssertEqual(base.resolving("[x].mp3")?.text, "http://h/dir/%5Bx%5D.mp3")
        XCTAssertEqual(base.resolving("http://[::1]:8080/[x]")?.text, "http://[::1]:8080/%5Bx%5D")
        XCTAssertEqual(base.resolving("?q=1")?.text, "http://h/dir/list.m3u?q=1")
        XCTAssertNil(base.resolving("%zz.mp3"))
        XCTAssertNil(base.resolving("100%.mp3"))
    }

    func testTheWrittenScheme_andAuthority_areReadFromTheTextAsWritten() throws {
        XCTAssertTrue(MediaURL.hasScheme("dav://nas/x"))
        XCTAssertTrue(MediaURL.hasScheme("socks5h://127.0.0.1:1080"))
        XCTAssertFalse(MediaURL.hasScheme("/srv/films.list"))
        XCTAssertFalse(MediaURL.hasScheme("films.m3u"))
        XCTAssertFalse(MediaURL.hasScheme("1http://x/"))
        XCTAssertFalse(MediaURL.hasScheme("c:\\films"))
        XCTAssertEqual(MediaURL.writtenScheme(of: "HTTPS://h/"), "https")
        let text = "http://u:p@bad host:80/a?b#c"
        let authority = try XCTUnwrap(MediaURL.writtenAuthority(in: text))
        XCTAssertEqual(text[authority], "u:p@bad host:80")
        XCTAssertNil(MediaURL(text), "libcurl refuses it; only the text can be read")
        XCTAssertEqual(MediaError.redacted(text).contains("p@"), false)
    }
}
