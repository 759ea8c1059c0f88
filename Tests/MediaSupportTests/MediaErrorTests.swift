import XCTest
@testable import MediaSupport
@testable import MediaTestSupport

final class MediaErrorTests: XCTestCase {
    func testRedacted_removesUserinfo() {
        XCTAssertEqual(MediaError.redacted("https://u:p%40ss@a.example/x"), "https://a.example/x")
        XCTAssertEqual(MediaError.redacted("http://user@a.example:81/x?y=1"), "http://a.example:81/x?y=1")
        XCTAssertEqual(MediaError.redacted("http://a.example/x@y"), "http://a.example/x@y")
    }

    func testRedacted_replacesTheValuesOfSignedURLSecrets_keepingTheRest() {
        let s3 = "https://b.s3.amazonaws.com/f.mp4?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F2026"
            + "&X-Amz-Date=20261130T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host"
            + "&X-Amz-Security-Token=tok&X-Amz-Signature=abc123#t=10"
        XCTAssertEqual(MediaError.redacted(s3),
                       "https://b.s3.amazonaws.com/f.mp4?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=REDACTED"
                       + "&X-Amz-Date=20261130T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host"
                       + "&X-Amz-Security-Token=REDACTED&X-Amz-Signature=REDACTED#t=10")
        let cloudFront = "https://d.cloudfront.net/v.mkv?Expires=1&Signature=s~s&Key-Pair-Id=K1&Policy=eyJ"
        XCTAssertEqual(MediaError.redacted(cloudFront),
                       "https://d.cloudfront.net/v.mkv?Expires=1&Signature=REDACTED&Key-Pair-Id=REDACTED&Policy=REDACTED")
    }

    func testRedacted_knowsCommonSecretNamesInAnyCase() {
        for name in ["sig", "SIG", "token", "access_token", "refresh_token", "key", "apiKey", "api_key", "auth",
                     "password", "pwd", "secret", "client_secret", "X-Goog-Signature", "x%2Damz%2Dsignature", "hdnts"] {
            XCTAssertEqual(MediaError.redacted("http://a.example/f?\(name)=v4lue&n=1"),
                           "http://a.example/f?\(name)=REDACTED&n=1", name)
        }
        for name in ["n", "part", "expires", "t", "start"] {
            let url = "http://a.example/f?\(name)=v"
            XCTAssertEqual(MediaError.redacted(url), url, name)
        }
    }

    func testRedacted_leavesOddURLsAlone_andNeverTraps() {
        for url in ["", "?", "?=", "http://a.example/?", "http://a.example/?&&", "http://a.example/?token",
                    "http://a.example/#t=10", "no scheme ?sig", "http://@/?=&="] {
            XCTAssertFalse(MediaError.redacted(url).contains("REDACTED"), url)
        }
        XCTAssertEqual(MediaError.redacted("?token="), "?token=REDACTED")
        XCTAssertEqual(MediaError.redacted("http://a.example/f?sig=a=b"), "http://a.example/f?sig=REDACTED")
        XCTAssertEqual(MediaError.redacted("http://a.example/f#access_token=x&n=1"),
                       "http://a.example/f#access_token=REDACTED&n=1")
        XCTAssertEqual(MediaError.redacted("http://a.example/f?n=1#sig=x?y"), "http://a.example/f?n=1#sig=REDACTED")
    }

    func testUserinfoRange_isTheSameForASCIIAndOtherURLs() {
        // The ASCII scan and the general path must agree: each URL is also
        // asked with a non-ASCII path after its authority, which takes the
        // general path and must find the same userinfo.
        for url in ["http://u:p@a.example/x", "https://u@b@a.example:81/?q=@", "http://a.example/x@y",
                    "http://a.example?x@y", "http://a.example#@", "http://@a.example/", "a.example/u@x",
                    "http://u:p@a.example", "x://", "://u@", ":/", "", "http:/u@a.example/",
                    "http://u%40x:p@a.example/f"] {
            let plain = MediaError.userinfoRange(in: url).map { String(url[$0]) }
            let other = url + "/é"
            XCTAssertEqual(MediaError.userinfoRange(in: other).map { String(other[$0]) }, plain, url)
        }
        let url = "https://u:p@b@a.example/x"
        XCTAssertEqual(MediaError.userinfoRange(in: url).map { String(url[$0]) }, "u:p@b@")
        let accented = "http://ü:p@a.example/x"
        XCTAssertEqual(MediaError.userinfoRange(in: accented).map { String(accented[$0]) }, "ü:p@")
    }
}
