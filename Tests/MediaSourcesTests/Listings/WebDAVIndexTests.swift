import Foundation
import XCTest
@testable import MediaSources
@testable import MediaStore
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport

final class WebDAVIndexTests: XCTestCase {
    private let base = "http://dav.example/media/"

    private func parse(_ xml: String, base: String? = nil) throws -> [Source] {
        try WebDAVIndex.parse(Data(xml.utf8), base: base ?? self.base)
    }

    private func response(_ href: String, prefix: String = "D", collection: Bool = false, length: String? = nil,
                          extra: String = "") -> String {
        let p = prefix.isEmpty ? "" : "\(prefix):"
        let type = collection ? "<\(p)resourcetype><\(p)collection/></\(p)resourcetype>" : "<\(p)resourcetype/>"
        let size = length.map { "<\(p)getcontentlength>\($0)</\(p)getcontentlength>" } ?? ""
        return "<\(p)response><\(p)href>\(href)</\(p)href><\(p)propstat><\(p)prop>\(type)\(size)\(extra)</\(p)prop>"
            + "<\(p)status>HTTP/1.1 200 OK</\(p)status></\(p)propstat></\(p)response>"
    }

    private func multistatus(_ responses: [String], prefix: String = "D") -> String {
        let p = prefix.isEmpty ? "" : "\(prefix):"
        let ns = prefix.isEmpty ? "xmlns=\"DAV:\"" : "xmlns:\(prefix)=\"DAV:\""
        return "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<\(p)multistatus \(ns)>"
            + responses.joined(separator: "\n") + "</\(p)multistatus>"
    }

    // MARK: Real-world answers

    /// Apache mod_dav: `D:` prefix, path hrefs, lp1/lp2 namespaces beside DAV:.
    private let apacheAnswer = """
        <?xml version="1.0" encoding="utf-8"?>
        <D:multistatus xmlns:D="DAV:" xmlns:ns0="DAV:">
        <D:response xmlns:lp1="DAV:" xmlns:lp2="http://apache.org/dav/props/">
        <D:href>/media/</D:href>
        <D:propstat><D:prop><lp1:resourcetype><D:collection/></lp1:resourcetype>
        <lp1:getlastmodified>Tue, 01 Dec 2026 10:00:00 GMT</lp1:getlastmodified>
        <lp1:getetag>"1000-5f"</lp1:getetag></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat>
        <D:propstat><D:prop><D:getcontentlength/><D:getcontenttype/></D:prop>
        <D:status>HTTP/1.1 404 Not Found</D:status></D:propstat>
        </D:response>
        <D:response xmlns:lp1="DAV:" xmlns:lp2="http://apache.org/dav/props/">
        <D:href>/media/film%20one.mkv</D:href>
        <D:propstat><D:prop><lp1:resourcetype/><lp1:getcontentlength>123456</lp1:getcontentlength>
        <lp1:getlastmodified>Tue, 01 Dec 2026 10:00:00 GMT</lp1:getlastmodified>
        <lp1:getetag>"1e240-5f"</lp1:getetag><D:getcontenttype>video/x-matroska</D:getcontenttype></D:prop>
        <D:status>HTTP/1.1 200 OK</D:status></D:propstat>
        </D:response>
        <D:response xmlns:lp1="DAV:">
        <D:href>/media/Season%201/</D:href>
        <D:propstat><D:prop><lp1:resourcetype><D:collection/></lp1:resourcetype></D:prop>
        <D:status>HTTP/1.1 200 OK</D:status></D:propstat>
        </D:response>
        </D:multistatus>
        """

    func testParse_apacheAnswer_skipsTheCollectionAndGivesFilesWithTheirRecords() throws {
        let sources = try parse(apacheAnswer)
        XCTAssertEqual(sources.map(\.name), ["film one.mkv", "Season 1"])
        XCTAssertEqual(sources[0].url, "http://dav.example/media/film%20one.mkv")
        XCTAssertEqual(sources[0].listedInfo, ContentInfo(length: 123456, contentType: "video/x-matroska",
                                                          etag: "\"1e240-5f\"",
                                                          lastModified: "Tue, 01 Dec 2026 10:00:00 GMT"))
        XCTAssertTrue(sources[1].isDirectory)
        XCTAssertEqual(sources[1].url, "http://dav.example/media/Season%201/")
        XCTAssertEqual((sources[1].listing as? WebDAVIndex)?.url, "http://dav.example/media/Season%201/")
    }

    func testParse_otherPrefixesAndTheDefaultNamespace_readTheSame() throws {
        for prefix in ["d", "ns0", "lp1", ""] {
            let xml = multistatus([response("/media/", prefix: prefix, collection: true),
                                   response("/media/a.bin", prefix: prefix, length: "10"),
                                   response("/media/sub/", prefix: prefix, collection: true)], prefix: prefix)
            let sources = try parse(xml)
            XCTAssertEqual(sources.map(\.name), ["a.bin", "sub"], prefix)
            XCTAssertEqual(sources[0].listedInfo?.length, 10, prefix)
            XCTAssertTrue(sources[1].isDirectory, prefix)
        }
    }

    func testParse_elementsOfAnotherNamespace_areNotTakenForDAVOnes() throws {
        let xml = """
            <D:multistatus xmlns:D="DAV:" xmlns:X="urn:other"><D:response><D:href>/media/a.bin</D:href>
            <D:propstat><D:prop><D:resourcetype/><X:getcontentlength>99</X:getcontentlength>
            <D:getcontentlength>7</D:getcontentlength><X:href>/elsewhere/</X:href></D:prop>
            <D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response></D:multistatus>
            """
        let sources = try parse(xml)
        XCTAssertEqual(sources.map(\.name), ["a.bin"])
        XCTAssertEqual(sources[0].listedInfo?.length, 7)
    }

    // MARK: Hrefs

    func testParse_absoluteURLAndPathHrefs_giveTheSameEntries() throws {
        let xml = multistatus([response("http://dav.example/media/", collection: true),
                               response("http://DAV.example:80/media/a.bin", length: "1"),
                               response("/media/b.bin", length: "2"),
                               response("c.bin", length: "3")])
        XCTAssertEqual(try parse(xml).map(\.url), ["http://dav.example/media/a.bin", "http://dav.example/media/b.bin",
                                                   "http://dav.example/media/c.bin"])
    }

    func testParse_encodedAndUnencodedHrefs_decodeToNamesAndEncodeInURLs() throws {
        let xml = multistatus([response("/media/a%20b%23c%25d.bin", length: "1"),
                               response("/media/caf%C3%A9.bin", length: "2"),
                               response("/media/space here #1 100%.bin", length: "3"),
                               response("/media/ünï cödé/", collection: true),
                               response("/media/a%2Fb.bin", length: "4")])
        let sources = try parse(xml)
        XCTAssertEqual(sources.map(\.name), ["a b#c%d.bin", "café.bin", "space here #1 100%.bin", "ünï cödé", "a/b.bin"])
        XCTAssertEqual(sources.map(\.url), [
            "http://dav.example/media/a%20b%23c%25d.bin", "http://dav.example/media/caf%C3%A9.bin",
            "http://dav.example/media/space%20here%20%231%20100%25.bin",
            "http://dav.example/media/%C3%BCn%C3%AF%20c%C3%B6d%C3%A9/", "http://dav.example/media/a%2Fb.bin",
        ])
    }

    func testParse_theCollectionItself_isSkippedWithOrWithoutItsSlashOrEncoding() throws {
        let base = "http://dav.example/my%20media/"
        for itself in ["/my%20media/", "/my%20media", "/my media", "http://dav.example/my%20media", "/my%20media//"] {
            let xml = multistatus([response(itself, collection: true), response("/my%20media/a.bin", length: "1")])
            XCTAssertEqual(try parse(xml, base: base).map(\.name), ["a.bin"], itself)
        }
    }

    func testParse_collectionsWithoutTheirSlash_areDirectoriesWhoseURLsEndInOne() throws {
        let sources = try parse(multistatus([response("/media/sub", collection: true)]))
        XCTAssertEqual(sources.map(\.url), ["http://dav.example/media/sub/"])
        XCTAssertTrue(sources[0].isDirectory)
    }

    func testParse_hrefsOutsideTheCollection_areDropped() throws {
        let outside = ["http://evil.example/media/x.bin", "https://dav.example/media/y.bin",
                       "http://dav.example:8080/media/z.bin", "/other/a.bin", "/media/../etc/passwd",
                       "/../../etc/passwd", "/media/sub/deep.bin", "/media/%2E%2E", "/mediafile.bin", ""]
        let xml = multistatus((outside + ["/media/kept.bin"]).map { response($0, length: "1") })
        XCTAssertEqual(try parse(xml).map(\.name), ["kept.bin"])
    }

    func testParse_credentialsOfTheCollectionURL_stayInItsChildrensURLs() throws {
        let xml = multistatus([response("http://dav.example/media/a.bin", length: "1"),
                               response("/media/sub/", collection: true)])
        let sources = try parse(xml, base: "http://user:secret@dav.example/media/")
        XCTAssertEqual(sources.map(\.url), ["http://user:secret@dav.example/media/a.bin",
                                            "http://user:secret@dav.example/media/sub/"])
    }

    // MARK: Hostile and odd entries

    func testParse_hostileSizes_dropThatEntryAndListTheRest() throws {
        let xml = multistatus([response("/media/huge.bin", length: "4611686018427387905"),
                               response("/media/overflow.bin", length: "99999999999999999999999"),
                               response("/media/negative.bin", length: "-1"),
                               response("/media/text.bin", length: "twelve"),
                               response("/media/hex.bin", length: "0x10"),
                               response("/media/max.bin", length: "4611686018427387904"),
                               response("/media/unknown.bin"),
                               response("/media/ok.bin", length: " 12 ")])
        let sources = try parse(xml)
        XCTAssertEqual(sources.map(\.name), ["max.bin", "unknown.bin", "ok.bin"])
        XCTAssertEqual(sources.map(\.listedInfo?.length), [1 << 62, nil, 12])
    }

    func testParse_controlCharactersInAValidator_dropThatEntry() throws {
        let xml = multistatus([response("/media/bad.bin", length: "1", extra: "<D:getetag>\"a&#13;&#10;X: y\"</D:getetag>"),
                               response("/media/good.bin", length: "1", extra: "<D:getetag>\"a\"</D:getetag>")])
        XCTAssertEqual(try parse(xml).map(\.name), ["good.bin"])
    }

    func testParse_anUnquotedETag_isQuotedAsTheETagHeaderIs() throws {
        let xml = multistatus([response("/media/a.bin", length: "1", extra: "<D:getetag>1-2-3</D:getetag>"),
                               response("/media/b.bin", length: "1", extra: "<D:getetag>\"4\"</D:getetag>")])
        XCTAssertEqual(try parse(xml).map(\.listedInfo?.etag), ["\"1-2-3\"", "\"4\""])
    }

    func testParse_aWeakETag_isNoValidatorAndTheFileKeepsItsDate() throws {
        let date = "Tue, 01 Dec 2026 10:00:00 GMT"
        let xml = multistatus([response("/media/a.bin", length: "1",
                                        extra: "<D:getetag>W/\"4\"</D:getetag><D:getlastmodified>\(date)</D:getlastmodified>")])
        let info = try XCTUnwrap(try parse(xml).first?.listedInfo)
        XCTAssertNil(info.etag)
        XCTAssertEqual(info.lastModified, date)
    }

    func testParse_aDateThatIsNoHTTPDate_keepsTheFileWithoutIt() throws {
        let xml = multistatus([response("/media/a.bin", length: "1", extra: "<D:getlastmodified>yesterday</D:getlastmodified>")])
        let sources = try parse(xml)
        XCTAssertEqual(sources.map(\.name), ["a.bin"])
        XCTAssertNil(sources[0].listedInfo?.lastModified)
    }

    func testParse_aFailedPropstatOrResponseStatus_givesNoValuesOrNoEntry() throws {
        let xml = """
            <D:multistatus xmlns:D="DAV:">
            <D:response><D:href>/media/a.bin</D:href>
            <D:propstat><D:prop><D:getcontentlength>5</D:getcontentlength></D:prop><D:status>HTTP/1.1 403 Forbidden</D:status></D:propstat>
            <D:propstat><D:prop><D:resourcetype/></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>
            <D:response><D:href>/media/gone.bin</D:href><D:status>HTTP/1.1 404 Not Found</D:status></D:response>
            </D:multistatus>
            """
        let sources = try parse(xml)
        XCTAssertEqual(sources.map(\.name), ["a.bin"])
        XCTAssertNil(sources[0].listedInfo)
    }

    func testParse_anHrefInsideAProperty_isNotTheResponses() throws {
        let xml = multistatus([response("/media/a.bin", length: "1",
                                        extra: "<D:lockdiscovery><D:activelock><D:owner><D:href>/elsewhere/x</D:href></D:owner></D:activelock></D:lockdiscovery>")])
        XCTAssertEqual(try parse(xml).map(\.url), ["http://dav.example/media/a.bin"])
    }

    func testParse_anOverlongValue_dropsThatEntry() throws {
        let long = String(repeating: "a", count: PropfindReader.maxValueBytes + 1)
        let xml = multistatus([response("/media/\(long)", length: "1"), response("/media/b.bin", length: "1")])
        XCTAssertEqual(try parse(xml).map(\.name), ["b.bin"])
    }

    func testParse_aRepeatedName_isListedOnce() throws {
        let xml = multistatus([response("/media/a.bin", length: "1"), response("/media/a%2Ebin", length: "2")])
        XCTAssertEqual(try parse(xml).map(\.listedInfo?.length), [1])
    }

    // MARK: Answers that are no multistatus

    func testParse_anHTMLPage_throwsSayingItIsNoMultistatus() {
        XCTAssertThrowsError(try parse("<html><body><a href=\"a.bin\">a.bin</a></body></html>")) { error in
            XCTAssertTrue((error as? MediaError)?.message.contains("not a WebDAV multistatus") ?? false, "\(error)")
        }
    }

    func testParse_textThatIsNoXML_throwsSayingSo() {
        for text in ["just some text", "", "<D:multistatus xmlns:D=\"DAV:\"><D:response>"] {
            XCTAssertThrowsError(try parse(text)) { error in
                XCTAssertTrue((error as? MediaError)?.message.contains("XML") ?? false, "\(text): \(error)")
            }
        }
    }

    func testParse_multistatusOfAnotherNamespace_isNoMultistatus() {
        XCTAssertThrowsError(try parse("<multistatus xmlns=\"urn:not-dav\"/>")) { error in
            XCTAssertTrue((error as? MediaError)?.message.contains("not a WebDAV multistatus") ?? false, "\(error)")
        }
    }

    func testParse_anEmptyCollection_givesNoEntries() throws {
        XCTAssertEqual(try parse(multistatus([response("/media/", collection: true)])), [])
    }

    // MARK: Size

    func testParse_aFiftyMegabyteAnswer_completesWithEveryEntry() throws {
        let count = 200_000
        var xml = Data(#"<?xml version="1.0" encoding="utf-8"?><D:multistatus xmlns:D="DAV:">"#.utf8)
        xml.reserveCapacity(60 << 20)
        for i in 0..<count {
            xml.append(contentsOf: Array("""
                <D:response><D:href>/media/Show%20S01E\(i).mkv</D:href><D:propstat><D:prop><D:resourcetype/>\
                <D:getcontentlength>\(1_000_000 + i)</D:getcontentlength>\
                <D:getlastmodified>Tue, 01 Dec 2026 10:00:00 GMT</D:getlastmodified><D:getetag>"\(i)-5f"</D:getetag>\
                </D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>\n
                """.utf8))
        }
        xml.append(contentsOf: Array("</D:multistatus>".utf8))
        XCTAssertGreaterThan(xml.count, 50_000_000)
        XCTAssertLessThan(xml.count, WebDAVIndex.maxAnswerBytes)
        let sources = try WebDAVIndex.parse(xml, base: base)
        XCTAssertEqual(sources.count, count)
        XCTAssertEqual(sources.last?.listedInfo?.length, Int64(1_000_000 + count - 1))
    }

    // MARK: The request and its failures

    func testList_sendsOnePropfindOfDepthOneAskingForTheRecordsProperties() throws {
        let seen = Locked<[FetchRequest]>([])
        let answer = Data(apacheAnswer.utf8)
        let context = ListingContext(clock: .system, fetch: { request, _ in
            seen.withLock { $0.append(request) }
            return TextFetch.Answer(status: 207, body: answer)
        })
        let sources = try WebDAVIndex(url: base).list(in: context)
        XCTAssertEqual(sources.count, 2)
        let requests = seen.withLock { $0 }
        XCTAssertEqual(requests.count, 1)
        XCTAssertEqual(requests[0].method, .propfind)
        XCTAssertEqual(requests[0].url, base)
        XCTAssertTrue(requests[0].headers.contains("Depth: 1"))
        let body = String(decoding: requests[0].body ?? [], as: UTF8.self)
        for property in ["resourcetype", "getcontentlength", "getlastmodified", "getetag", "getcontenttype"] {
            XCTAssertTrue(body.contains("<D:\(property)/>"), property)
        }
    }

    private func failure(status: Int, url: String? = nil, http: HTTPOptions = HTTPOptions()) -> MediaError? {
        let context = ListingContext(clock: .system, http: http, fetch: { _, _ in TextFetch.Answer(status: status, body: Data()) })
        do {
            _ = try WebDAVIndex(url: url ?? base).list(in: context)
            XCTFail("HTTP \(status) listed")
            return nil
        } catch {
            return error as? MediaError
        }
    }

    func testList_401_saysWhetherCredentialsWereSentAndNeverShowsThem() throws {
        let without = try XCTUnwrap(failure(status: 401))
        XCTAssertEqual(without.errno, EACCES)
        XCTAssertTrue(without.message.contains("no credentials were sent"), without.message)
        let with = try XCTUnwrap(failure(status: 401, url: "http://user:s3cret@dav.example/media/"))
        XCTAssertEqual(with.errno, EACCES)
        XCTAssertTrue(with.message.contains("credentials were sent"), with.message)
        XCTAssertFalse(with.message.contains("s3cret"), with.message)
        XCTAssertTrue(with.message.contains("http://dav.example/media/"), with.message)
    }

    func testList_405_saysTheServerHasNoPropfindAndSuggestsTheHTMLIndexForm() throws {
        for status in [405, 501] {
            let error = try XCTUnwrap(failure(status: status))
            XCTAssertTrue(error.message.contains("does not answer PROPFIND"), error.message)
            XCTAssertTrue(error.message.contains("mount http://dav.example/media/"), error.message)
        }
    }

    func testList_200_saysItIsNoMultistatus() throws {
        let error = try XCTUnwrap(failure(status: 200))
        XCTAssertTrue(error.message.contains("not a WebDAV multistatus"), error.message)
    }

    // MARK: Sources

    func testSourceAt_davAndDavsURLs_areWebDAVCollectionsReadOverHTTPAndHTTPS() {
        let cases = [("dav://host.example/media/", "http://host.example/media/"),
                     ("davs://u:p@host.example:8443/media", "https://u:p@host.example:8443/media/"),
                     ("DAVS://host.example", "https://host.example/")]
        for (given, http) in cases {
            let source = Source.at(url: given)
            XCTAssertEqual(source.url, http, given)
            XCTAssertEqual((source.listing as? WebDAVIndex)?.url, http, given)
        }
        XCTAssertEqual(Source.at(url: "davs://host.example/my%20media/").name, "my media")
    }

    func testSourceAt_httpURLs_areAsBefore() {
        XCTAssertTrue(Source.at(url: "http://host.example/media/").listing is HTMLIndex)
        XCTAssertFalse(Source.at(url: "https://host.example/a.mkv").isDirectory)
    }

    func testSourceParse_davURLs_areAccepted() throws {
        let sources = try Source.parse(arguments: ["davs://host.example/media/"], clock: .system)
        XCTAssertTrue(sources[0].listing is WebDAVIndex)
    }
}
