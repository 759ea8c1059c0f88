import Foundation
import XCTest
@testable import MediaSources
@testable import MediaStore
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport

final class S3PrefixTests: XCTestCase {
    private let endpoint = S3Endpoint(custom: "http://127.0.0.1:9000", region: "us-east-1")
    private var shows: S3Prefix { S3Prefix(bucket: "media", prefix: "shows/", endpoint: endpoint) }

    private func page(contents: [(key: String, size: String)] = [], prefixes: [String] = [],
                      truncated: Bool = false, token: String? = nil) -> [UInt8] {
        let objects = contents.map { object in
            """
            <Contents><Key>\(object.key)</Key><LastModified>2026-12-02T00:35:53.000Z</LastModified>\
            <ETag>&quot;9b2cf535f27731c974343645a3985328&quot;</ETag><Size>\(object.size)</Size>\
            <StorageClass>STANDARD</StorageClass></Contents>
            """
        }.joined()
        let common = prefixes.map { "<CommonPrefixes><Prefix>\($0)</Prefix></CommonPrefixes>" }.joined()
        let next = token.map { "<NextContinuationToken>\($0)</NextContinuationToken>" } ?? ""
        return Array("""
            <?xml version="1.0" encoding="UTF-8"?>
            <ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>media</Name>\
            <Prefix>shows/</Prefix><KeyCount>\(contents.count)</KeyCount><MaxKeys>1000</MaxKeys>\
            <Delimiter>/</Delimiter><IsTruncated>\(truncated)</IsTruncated>\(next)\(objects)\(common)</ListBucketResult>
            """.utf8)
    }

    // MARK: The XML reader

    func testPage_realAnswer_givesObjectsPrefixesAndToken() throws {
        let parsed = try S3ListXML.page(Data(page(contents: [("shows/a.mkv", "1234")], prefixes: ["shows/s1/"],
                                                  truncated: true, token: "1/abc+==")))
        XCTAssertEqual(parsed.objects, [S3ListPage.Object(key: "shows/a.mkv", size: "1234",
                                                          etag: "\"9b2cf535f27731c974343645a3985328\"",
                                                          lastModified: "2026-12-02T00:35:53.000Z")])
        XCTAssertEqual(parsed.prefixes, ["shows/s1/"])
        XCTAssertTrue(parsed.isTruncated)
        XCTAssertEqual(parsed.nextContinuationToken, "1/abc+==")
    }

    func testPage_escapedAndUnicodeKeys_areDecodedByTheParser() throws {
        let parsed = try S3ListXML.page(Data(page(contents: [("shows/a &amp; b &lt;1&gt; café ☕ #%.mkv", "1")])))
        XCTAssertEqual(parsed.objects.first?.key, "shows/a & b <1> café ☕ #%.mkv")
    }

    func testPage_malformedOrCutXML_throwsEIOSayingWhere() {
        XCTAssertThrowsError(try S3ListXML.page(Data("<ListBucketResult>\n<Key></Size></ListBucketResult>".utf8))) {
            XCTAssertEqual(($0 as? MediaError)?.errno, EIO)
            XCTAssertTrue("\($0)".contains("line 2"), "\($0)")
        }
        XCTAssertThrowsError(try S3ListXML.page(Data("<ListBucketResult><Contents>".utf8))) {
            XCTAssertEqual(($0 as? MediaError)?.errno, EIO)
        }
    }

    func testPage_anotherRootElement_isRefused() {
        XCTAssertThrowsError(try S3ListXML.page(Data("<html><body>hello</body></html>".utf8)))
    }

    func testPage_exponentialEntities_areRefusedNotExpanded() {
        var declarations = "<!ENTITY l0 \"laughlaughlaugh\">"
        for level in 1...10 {
            declarations += "<!ENTITY l\(level) \"" + String(repeating: "&l\(level - 1);", count: 10) + "\">"
        }
        let bomb = """
            <?xml version="1.0"?><!DOCTYPE ListBucketResult [\(declarations)]>
            <ListBucketResult><Contents><Key>&l10;</Key><Size>1</Size></Contents></ListBucketResult>
            """
        XCTAssertThrowsError(try S3ListXML.page(Data(bomb.utf8)))
    }

    func testPage_aValueLongerThanTheBound_marksItsEntryOnly() throws {
        let long = String(repeating: "x", count: S3ListXML.maxText + 1)
        let parsed = try S3ListXML.page(Data(page(contents: [("shows/\(long)", "1"), ("shows/ok", "2")])))
        XCTAssertEqual(parsed.objects.map(\.tooLong), [true, false])
    }

    func testError_regionAndCode_areRead() {
        let body = """
            <?xml version="1.0" encoding="UTF-8"?><Error><Code>AuthorizationHeaderMalformed</Code>\
            <Message>the region 'us-east-1' is wrong; expecting 'eu-west-1'</Message>\
            <Region>eu-west-1</Region><RequestId>X</RequestId></Error>
            """
        let answer = S3ListXML.error(Data(body.utf8))
        XCTAssertEqual(answer?.code, "AuthorizationHeaderMalformed")
        XCTAssertEqual(answer?.region, "eu-west-1")
    }

    // MARK: Entries

    func testEntries_folderMarkerSkipped_prefixesAreDirectories_filesCarryTheirInfo() {
        let parsed = try! S3ListXML.page(Data(page(contents: [("shows/", "0"), ("shows/ep 1#.mkv", "1234")],
                                                   prefixes: ["shows/s1/"])))
        let sources = shows.entries(of: parsed)
        XCTAssertEqual(sources.map(\.name), ["s1", "ep 1#.mkv"])
        XCTAssertTrue(sources[0].isDirectory)
        XCTAssertEqual((sources[0].listing as? S3Prefix)?.prefix, "shows/s1/")
        XCTAssertEqual(sources[1].url, "http://127.0.0.1:9000/media/shows/ep%201%23.mkv")
        XCTAssertEqual(sources[1].listedInfo, ContentInfo(length: 1234, etag: "\"9b2cf535f27731c974343645a3985328\"",
                                                          lastModified: "Wed, 02 Dec 2026 00:35:53 GMT",
                                                          acceptsRanges: true))
    }

    func testEntries_hostileSizeOrDate_dropOnlyThatEntry() {
        var parsed = S3ListPage()
        parsed.objects = [
            S3ListPage.Object(key: "shows/huge", size: "99999999999999999999999"),
            S3ListPage.Object(key: "shows/negative", size: "-1"),
            S3ListPage.Object(key: "shows/baddate", size: "1", lastModified: "yesterday"),
            S3ListPage.Object(key: "other/outside", size: "1"),
            S3ListPage.Object(key: "shows/fine", size: "7"),
        ]
        XCTAssertEqual(shows.entries(of: parsed).map(\.name), ["fine"])
    }

    func testEntries_dotDotName_isKeptForTheCatalogToMakeSafe() {
        var parsed = S3ListPage()
        parsed.prefixes = ["shows/../", "shows//"]
        let sources = shows.entries(of: parsed)
        XCTAssertEqual(sources.map(\.name), [".."])
        XCTAssertEqual(FileNaming.safe(sources[0].name), "_..")
    }

    func testEntries_controlCharactersInAKey_neverReachALogLineRaw() {
        var parsed = S3ListPage()
        parsed.prefixes = ["shows/evil\nline/"]
        let source = shows.entries(of: parsed)[0]
        XCTAssertEqual(source.listing?.origin, "s3://media/shows/evil?line/")
        // The URL is the directory's identity, never shown: the key verbatim.
        XCTAssertEqual(source.url, "s3://media/shows/evil\nline/")
        XCTAssertEqual((source.listing as? S3Prefix)?.prefix, "shows/evil\nline/", "the key itself is kept")
        let remade = shows.subdirectory(at: source.url) as? S3Prefix
        XCTAssertEqual(remade?.prefix, "shows/evil\nline/", "a saved listing makes the same prefix again")
        XCTAssertEqual(remade?.bucket, "media")
    }

    // MARK: Pages

    func testList_followsEveryContinuationToken_inOrder() throws {
        var asked: [String] = []
        let pages = [page(contents: [("shows/1", "1")], truncated: true, token: "t/1+"),
                     page(contents: [("shows/2", "2")], truncated: true, token: "t2"),
                     page(contents: [("shows/3", "3")])]
        let sources = try shows.list(signedBy: nil) { url in
            asked.append(url)
            return TextFetch.Answer(status: 200, body: Data(pages[asked.count - 1]))
        }
        XCTAssertEqual(sources.map(\.name), ["1", "2", "3"])
        XCTAssertEqual(asked, [
            "http://127.0.0.1:9000/media/?delimiter=%2F&list-type=2&prefix=shows%2F",
            "http://127.0.0.1:9000/media/?continuation-token=t%2F1%2B&delimiter=%2F&list-type=2&prefix=shows%2F",
            "http://127.0.0.1:9000/media/?continuation-token=t2&delimiter=%2F&list-type=2&prefix=shows%2F",
        ])
    }

    func testList_truncatedWithTheSameToken_failsInsteadOfLooping() {
        var count = 0
        XCTAssertThrowsError(try shows.list(signedBy: nil) { _ in
            count += 1
            return TextFetch.Answer(status: 200, body: Data(self.page(truncated: true, token: "same")))
        })
        XCTAssertEqual(count, 2)
    }

    func testList_expiredToken_reloadsTheKeysAndAsksAgain() throws {
        let credentials = S3Credentials(key: S3Key(accessKeyID: "A", secretAccessKey: "S"))
        var count = 0
        let expired = Array("<Error><Code>ExpiredToken</Code><Message>expired</Message></Error>".utf8)
        let sources = try shows.list(signedBy: credentials) { _ in
            count += 1
            return TextFetch.Answer(status: count == 1 ? 400 : 200, body: Data(count == 1 ? expired : self.page()))
        }
        XCTAssertEqual(count, 2)
        XCTAssertEqual(sources, [])
    }

    // MARK: Errors

    func testFailure_403Anonymous_namesTheDirectoryAndSaysNoCredentialsWereSent() {
        let body = Array("<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>".utf8)
        let error = shows.failure(status: 403, body: Data(body), credentials: nil)
        XCTAssertEqual(error.errno, EACCES)
        XCTAssertTrue(error.message.hasPrefix("s3://media/shows/: access denied"), error.message)
        XCTAssertTrue(error.message.contains("no credentials were sent"), error.message)
        XCTAssertTrue(error.message.contains("AccessDenied: Access Denied"), error.message)
    }

    func testFailure_403Signed_saysWhereTheKeysCameFromButNotTheKeys() {
        let credentials = S3Credentials(key: S3Key(accessKeyID: "AKIDSECRETID", secretAccessKey: "sekrit"))
        let error = shows.failure(status: 403, body: Data(), credentials: credentials)
        XCTAssertTrue(error.message.contains("signed with AWS_ACCESS_KEY_ID from the environment"), error.message)
        XCTAssertFalse(error.message.contains("sekrit"))
        XCTAssertFalse(error.message.contains("AKIDSECRETID"))
    }

    func testFailure_permanentRedirect_namesTheRegionOfItsEndpoint() {
        let body = Array("""
            <Error><Code>PermanentRedirect</Code><Message>The bucket you are attempting to access must be \
            addressed using the specified endpoint.</Message><Endpoint>media.s3.eu-west-1.amazonaws.com</Endpoint>\
            </Error>
            """.utf8)
        let error = shows.failure(status: 301, body: Data(body), credentials: nil)
        XCTAssertTrue(error.message.contains("is in region 'eu-west-1', not 'us-east-1': mount with --s3-region eu-west-1"),
                      error.message)
    }

    func testFailure_noSuchBucket_isENOENT() {
        let body = Array("<Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message></Error>".utf8)
        let error = shows.failure(status: 404, body: Data(body), credentials: nil)
        XCTAssertEqual(error.errno, ENOENT)
        XCTAssertTrue(error.message.contains("no bucket 'media'"), error.message)
    }

    // MARK: Addresses

    func testEncode_keepsUnreservedAndSlash_encodesEverythingElseInUpperCase() {
        XCTAssertEqual(S3Endpoint.encode("a b/c#d%e+f&g=h~i_j.k-l/café", keepingSlash: true),
                       "a%20b/c%23d%25e%2Bf%26g%3Dh~i_j.k-l/caf%C3%A9")
        XCTAssertEqual(S3Endpoint.encode("a/b"), "a%2Fb")
    }

    func testObjectURL_awsIsVirtualHosted_dottedBucketsAndCustomEndpointsPathStyle() {
        let aws = S3Endpoint(custom: nil, region: "eu-west-1")
        XCTAssertEqual(aws.objectURL(bucket: "media", key: "a b.mkv"), "https://media.s3.eu-west-1.amazonaws.com/a%20b.mkv")
        XCTAssertEqual(aws.objectURL(bucket: "my.media", key: "x"), "https://s3.eu-west-1.amazonaws.com/my.media/x")
        XCTAssertEqual(endpoint.objectURL(bucket: "media", key: "../x"), "http://127.0.0.1:9000/media/../x")
    }

    func testArgument_bucketAndPrefix_withAndWithoutTrailingSlash() throws {
        XCTAssertEqual(try S3Prefix(argument: "s3://media", endpoint: endpoint).prefix, "")
        XCTAssertEqual(try S3Prefix(argument: "s3://media/shows", endpoint: endpoint).prefix, "shows/")
        XCTAssertEqual(try S3Prefix(argument: "s3://media/my shows/s1/", endpoint: endpoint).prefix, "my shows/s1/")
        XCTAssertThrowsError(try S3Prefix(argument: "s3://a/", endpoint: endpoint))
        XCTAssertThrowsError(try S3Prefix(argument: "s3://bad bucket/", endpoint: endpoint))
        let source = try S3Prefix.source(forArgument: "s3://media/shows/s1/",
                                         settings: S3Mount(endpoint: endpoint, credentials: nil))
        XCTAssertEqual(source.name, "s1")
        XCTAssertEqual(source.url, "s3://media/shows/s1/")
    }

    func testHTTPDate_fromS3Times_andNothingElse() {
        XCTAssertEqual(S3Prefix.httpDate(iso8601: "2026-12-02T00:35:53.000Z"), "Wed, 02 Dec 2026 00:35:53 GMT")
        XCTAssertEqual(S3Prefix.httpDate(iso8601: "1970-01-01T00:00:00Z"), "Thu, 01 Jan 1970 00:00:00 GMT")
        for bad in ["2026-12-02", "2026-13-02T00:00:00Z", "2026-12-02T00:00:00+01:00", "99999-12-02T00:00:00Z",
                    "2026-12-02T00:00:00.Z", "2026-12-02T00:00:00.1x2Z"] {
            XCTAssertNil(S3Prefix.httpDate(iso8601: bad), bad)
        }
    }
}
