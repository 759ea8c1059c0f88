import Foundation
import XCTest
@testable import MediaSources
@testable import MediaStore
@testable import MediaNetwork
@testable import MediaSupport

/// Each kind's change token (decision 0049): what its listing says, what
/// its poll asks, and how it judges the answer, with fake answers.
final class ChangePollingTests: XCTestCase {
    // MARK: WebDAV

    private let dav = WebDAVIndex(url: "http://dav.example/media/")

    private func davAnswer(etag: String?, lastModified: String? = "Sun, 06 Dec 2026 10:00:00 GMT",
                           ctag: String? = nil, children: [String] = []) -> TextFetch.Answer {
        var props = ""
        if let etag { props += "<D:getetag>\(etag)</D:getetag>" }
        if let lastModified { props += "<D:getlastmodified>\(lastModified)</D:getlastmodified>" }
        if let ctag { props += "<CS:getctag>\(ctag)</CS:getctag>" }
        let me = "<D:response><D:href>/media/</D:href><D:propstat><D:prop><D:resourcetype><D:collection/></D:resourcetype>"
            + props + "</D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>"
        let kids = children.map { name in
            "<D:response><D:href>/media/\(name)</D:href><D:propstat><D:prop><D:resourcetype/>"
                + "<D:getcontentlength>5</D:getcontentlength></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>"
        }
        let xml = "<?xml version=\"1.0\"?><D:multistatus xmlns:D=\"DAV:\" xmlns:CS=\"http://calendarserver.org/ns/\">"
            + me + kids.joined() + "</D:multistatus>"
        return TextFetch.Answer(status: 207, body: Data(xml.utf8))
    }

    func testWebDAV_listingsOwnResponse_isTheToken_andAnUnchangedDepth0AnswerMatchesIt() throws {
        let listed = davAnswer(etag: "\"abc\"", children: ["a.mkv", "b.mkv"])
        let context = ListingContext(clock: .system, fetchText: { _ in "" }, fetch: { request, _ in
            XCTAssertEqual(request.method, .propfind)
            XCTAssertTrue(request.headers.contains("Depth: 1"))
            XCTAssertTrue(String(decoding: request.body ?? [], as: UTF8.self).contains("getctag"))
            return listed
        })
        let (sources, token) = try dav.listWithToken(in: context)
        XCTAssertEqual(sources.map(\.name), ["a.mkv", "b.mkv"])
        XCTAssertNotNil(token)
        let request = dav.changeRequest(since: token)
        XCTAssertEqual(request.method, .propfind)
        XCTAssertEqual(request.headers.first, "Depth: 0")
        guard case .unchanged = try dav.verdict(on: davAnswer(etag: "\"abc\""), since: token) else {
            return XCTFail("the same getetag and date read as a change")
        }
    }

    func testWebDAV_anotherGetetagOrCtag_isAChange_butAWeakTwinOfTheSameTagIsNot() throws {
        let token = WebDAVIndex.token(of: try XCTUnwrap(read(davAnswer(etag: "\"abc\"", ctag: "7"))))
        XCTAssertEqual(try dav.verdict(on: davAnswer(etag: "\"abd\"", ctag: "7"), since: token),
                       .changed(seen: WebDAVIndex.token(of: try XCTUnwrap(read(davAnswer(etag: "\"abd\"", ctag: "7"))))))
        guard case .changed = try dav.verdict(on: davAnswer(etag: "\"abc\"", ctag: "8"), since: token) else {
            return XCTFail("another getctag was not a change")
        }
        guard case .unchanged = try dav.verdict(on: davAnswer(etag: "W/\"abc\"", ctag: "7"), since: token) else {
            return XCTFail("Apache's weak twin of the same tag read as a change")
        }
    }

    func testWebDAV_aCollectionThatSaysNothingOfItself_hasNoToken_soEveryPollIsAListing() throws {
        XCTAssertNil(WebDAVIndex.token(of: try XCTUnwrap(read(davAnswer(etag: nil, lastModified: nil)))))
        guard case .changed(nil) = try dav.verdict(on: davAnswer(etag: nil, lastModified: nil), since: nil) else {
            return XCTFail("no token, yet not listed")
        }
    }

    func testWebDAV_anErrorStatusOrNoMultistatus_failsThePoll_namingTheCollection() {
        XCTAssertThrowsError(try dav.verdict(on: TextFetch.Answer(status: 401, body: Data()), since: nil)) { error in
            XCTAssertEqual((error as? MediaError)?.errno, EACCES)
            XCTAssertTrue((error as? MediaError)?.message.contains("dav.example/media/") ?? false)
        }
        XCTAssertThrowsError(try dav.verdict(on: TextFetch.Answer(status: 207, body: Data("<html>".utf8)), since: nil))
    }

    private func read(_ answer: TextFetch.Answer) throws -> PropfindReader.Response? {
        var first: PropfindReader.Response?
        try PropfindReader.read(answer.body) { if first == nil { first = $0 } }
        return first
    }

    // MARK: HTML index

    private let html = HTMLIndex(url: "http://host/films/")
    private let page = "<a href=\"a.mkv\">a.mkv</a>\n<a href=\"b.mkv\">b.mkv</a>\n<a href=\"sub/\">sub/</a>"

    func testHTML_listingsToken_matchesAPollOfTheSamePage_whateverElseThePageSays() throws {
        let page = self.page
        let context = ListingContext(clock: .system, fetchText: { _ in page })
        let (sources, token) = try html.listWithToken(in: context)
        XCTAssertEqual(sources.map(\.name), ["a.mkv", "b.mkv", "sub"])
        XCTAssertEqual(html.changeRequest(since: token).headers, [], "no validators yet: a plain GET")
        let later = TextFetch.Answer(status: 200, body: Data(("<p>made at 10:01</p>" + page).utf8),
                                     headers: ["etag": "\"p1\"", "last-modified": "Sun, 06 Dec 2026 10:00:00 GMT"])
        guard case .unchanged(let kept) = try html.verdict(on: later, since: token) else {
            return XCTFail("the same entries read as a change")
        }
        XCTAssertEqual(kept.etag, "\"p1\"")
        XCTAssertEqual(html.changeRequest(since: kept).headers,
                       ["If-None-Match: \"p1\"", "If-Modified-Since: Sun, 06 Dec 2026 10:00:00 GMT"])
    }

    func testHTML_a304ToValidatorsSent_isUnchanged_but304WithoutThem_failsThePoll() throws {
        let token = ChangeToken(digest: "d", etag: "\"p1\"")
        XCTAssertEqual(try html.verdict(on: TextFetch.Answer(status: 304, body: Data()), since: token), .unchanged(token))
        XCTAssertThrowsError(try html.verdict(on: TextFetch.Answer(status: 304, body: Data()),
                                              since: ChangeToken(digest: "d")))
    }

    func testHTML_aNewLinkOrLength_isAChange_whoseValidatorsTheNextListingAdopts() throws {
        let page = self.page
        let (_, token) = try html.listWithToken(in: ListingContext(clock: .system, fetchText: { _ in page }))
        let grown = page + "\n<a href=\"c.mkv\">c.mkv</a>"
        let answer = TextFetch.Answer(status: 200, body: Data(grown.utf8), headers: ["etag": "\"p2\""])
        guard case .changed(let seen?) = try html.verdict(on: answer, since: token) else {
            return XCTFail("a new link was not a change")
        }
        let (_, relisted) = try html.listWithToken(in: ListingContext(clock: .system, fetchText: { _ in grown }))
        XCTAssertEqual(relisted?.adopting(validatorsOf: seen).etag, "\"p2\"")
        XCTAssertNil(token?.adopting(validatorsOf: seen).etag, "validators of another page are not adopted")
    }

    func testHTML_aHostileValidator_isNeverSentBack() throws {
        let answer = TextFetch.Answer(status: 200, body: Data(page.utf8),
                                      headers: ["etag": "\"a\"\r\nX-Evil: 1", "last-modified": "not a date"])
        guard case .changed(let seen?) = try html.verdict(on: answer, since: nil) else { return XCTFail() }
        XCTAssertNil(seen.etag)
        XCTAssertNil(seen.lastModified)
    }

    // MARK: S3

    private let s3 = S3Prefix(bucket: "media", prefix: "films/",
                              endpoint: S3Endpoint(custom: "http://127.0.0.1:9000", region: "us-east-1"))

    private func s3Page(_ objects: [(String, String, String)], prefixes: [String] = [], truncated: Bool = false) -> Data {
        let contents = objects.map { key, etag, size in
            "<Contents><Key>\(key)</Key><ETag>\(etag)</ETag><Size>\(size)</Size></Contents>"
        }.joined()
        let common = prefixes.map { "<CommonPrefixes><Prefix>\($0)</Prefix></CommonPrefixes>" }.joined()
        let more = truncated ? "<IsTruncated>true</IsTruncated><NextContinuationToken>t2</NextContinuationToken>" : ""
        return Data(("<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">" + more + contents + common
                     + "</ListBucketResult>").utf8)
    }

    func testS3_theTokenIsTheFirstPages_andAPollAsksForThatPageOnly() throws {
        var asked: [String] = []
        let (sources, token) = try s3.listPages(signedBy: nil) { url in
            asked.append(url)
            return TextFetch.Answer(status: 200, body: url.contains("continuation-token")
                ? self.s3Page([("films/z.mkv", "\"9\"", "9")])
                : self.s3Page([("films/a.mkv", "\"1\"", "10")], prefixes: ["films/sub/"], truncated: true))
        }
        XCTAssertEqual(sources.count, 3)
        XCTAssertEqual(asked.count, 2)
        XCTAssertEqual(s3.changeRequest(since: token).url, asked[0])
        let samePage = TextFetch.Answer(status: 200, body: s3Page([("films/a.mkv", "\"1\"", "10")], prefixes: ["films/sub/"],
                                                                  truncated: true))
        guard case .unchanged = try s3.verdict(on: samePage, since: token) else { return XCTFail("same page, changed") }
    }

    func testS3_anotherETagSizeKeyOrDirectoryOnTheFirstPage_isAChange() throws {
        let token = S3Prefix.token(of: try S3ListXML.page(s3Page([("films/a.mkv", "\"1\"", "10")], prefixes: ["films/s/"])))
        for page in [s3Page([("films/a.mkv", "\"2\"", "10")], prefixes: ["films/s/"]),
                     s3Page([("films/a.mkv", "\"1\"", "11")], prefixes: ["films/s/"]),
                     s3Page([("films/b.mkv", "\"1\"", "10")], prefixes: ["films/s/"]),
                     s3Page([("films/a.mkv", "\"1\"", "10")])] {
            guard case .changed = try s3.verdict(on: TextFetch.Answer(status: 200, body: page), since: token) else {
                return XCTFail("a change on the first page not seen")
            }
        }
        XCTAssertThrowsError(try s3.verdict(on: TextFetch.Answer(status: 403, body: Data()), since: token)) { error in
            XCTAssertEqual((error as? MediaError)?.errno, EACCES)
        }
    }

    // MARK: The token

    func testToken_partsAreLengthPrefixed_soMovingABoundaryIsAnotherToken() {
        XCTAssertNotEqual(ChangeToken(of: ["ab", "c"]).digest, ChangeToken(of: ["a", "bc"]).digest)
        XCTAssertEqual(ChangeToken(of: ["ab", "c"]), ChangeToken(of: ["ab", "c"]))
    }
}
