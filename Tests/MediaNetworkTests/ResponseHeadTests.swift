import XCTest
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport

final class ResponseHeadTests: XCTestCase {
    private func head(_ headers: [String: String], status: Int = 206) -> ResponseHead {
        ResponseHead(status: status, headers: headers)
    }

    private func contentRange(_ value: String) -> (range: Range<Int64>, total: Int64?)? {
        head(["content-range": value]).contentRange
    }

    // MARK: Content-Range

    func testContentRange_wellFormed_isHalfOpenRangeAndTotal() {
        let parsed = contentRange("bytes 0-99/1000")
        XCTAssertEqual(parsed?.range, 0..<100)
        XCTAssertEqual(parsed?.total, 1000)
    }

    func testContentRange_lastByteOfFile_isAccepted() {
        let parsed = contentRange("bytes 999-999/1000")
        XCTAssertEqual(parsed?.range, 999..<1000)
        XCTAssertEqual(parsed?.total, 1000)
    }

    func testContentRange_withUnknownTotal_hasNilTotal() {
        let parsed = contentRange("bytes 100-199/*")
        XCTAssertEqual(parsed?.range, 100..<200)
        XCTAssertNotNil(parsed)
        XCTAssertNil(parsed?.total)
    }

    func testContentRange_isCaseInsensitiveAndToleratesSpaces() {
        XCTAssertEqual(contentRange("Bytes   5-9/10")?.range, 5..<10)
        XCTAssertEqual(contentRange("BYTES 0-0/1")?.range, 0..<1)
    }

    func testContentRange_malformed_isNil() {
        for value in ["", "bytes", "bytes 0-99", "bytes 0-99/", "bytes 0-99/abc", "bytes -5/100",
                      "bytes 10-5/100", "bytes 0-100/100", "bytes 0-200/100", "bytes a-b/100",
                      "items 0-99/100", "bytes */100", "bytes 0-99/100/5", "bytes=0-99/100"] {
            XCTAssertNil(contentRange(value), "'\(value)'")
        }
    }

    func testContentRange_absent_isNil() {
        XCTAssertNil(head([:]).contentRange)
    }

    func testUnsatisfiedRangeTotal_ofStarRange_isTheTotal() {
        XCTAssertEqual(head(["content-range": "bytes */4096"], status: 416).unsatisfiedRangeTotal, 4096)
        XCTAssertEqual(head(["content-range": "Bytes */0"], status: 416).unsatisfiedRangeTotal, 0)
    }

    func testUnsatisfiedRangeTotal_ofOrdinaryRangeOrGarbage_isNil() {
        XCTAssertNil(head(["content-range": "bytes 0-1/4096"]).unsatisfiedRangeTotal)
        XCTAssertNil(head(["content-range": "bytes */many"]).unsatisfiedRangeTotal)
        XCTAssertNil(head([:]).unsatisfiedRangeTotal)
    }

    // MARK: Other fields

    func testFields_areReadFromLowerCasedHeaders() {
        let h = head(["content-length": "1234", "content-type": "video/mp4", "etag": "\"abc\"",
                      "last-modified": "Tue, 01 Oct 2024 10:00:00 GMT", "accept-ranges": "Bytes"], status: 200)
        XCTAssertEqual(h.contentLength, 1234)
        XCTAssertEqual(h.contentType, "video/mp4")
        XCTAssertEqual(h.etag, "\"abc\"")
        XCTAssertEqual(h.lastModified, "Tue, 01 Oct 2024 10:00:00 GMT")
        XCTAssertTrue(h.acceptsRanges)
    }

    func testAcceptsRanges_isFalseForNoneOrAbsent() {
        XCTAssertFalse(head(["accept-ranges": "none"]).acceptsRanges)
        XCTAssertFalse(head([:]).acceptsRanges)
    }

    func testContentLength_nonNumeric_isNil() {
        XCTAssertNil(head(["content-length": "lots"]).contentLength)
    }

    // MARK: Header lines

    private func parse(_ lines: [String]) -> ResponseHead {
        var h = ResponseHead(status: 0, headers: [:])
        for line in lines { h.add(line: line[...]) }
        return h
    }

    func testAddLine_parsesStatusAndHeadersWithLineEndings() {
        let h = parse(["HTTP/1.1 206 Partial Content\r\n", "Content-Range: bytes 0-9/100\r\n",
                       "ETag:  \"x\"  \r\n", "\r\n"])
        XCTAssertEqual(h.status, 206)
        XCTAssertEqual(h.headers, ["content-range": "bytes 0-9/100", "etag": "\"x\""])
    }

    func testAddLine_trimsHTTPsSpacesAndTabsOnly_andKeepsTextThatIsNotASCII() {
        let h = parse(["HTTP/1.1 200 OK\r\n", "Content-Type:\t video/mp4 \t\r\n",
                       "X-Title: \u{00A0}Café\u{00A0}\r\n", "  ETag: \"é\"\n"])
        XCTAssertEqual(h.contentType, "video/mp4")
        // A no-break space is not HTTP whitespace: it is part of the value.
        XCTAssertEqual(h.headers["x-title"], "\u{00A0}Café\u{00A0}")
        XCTAssertEqual(h.etag, "\"é\"")
    }

    func testAddLine_valueWithColons_keepsEverythingAfterTheFirst() {
        let h = parse(["HTTP/2 302\r\n", "Location: https://cdn.example:8443/a.mp4\r\n"])
        XCTAssertEqual(h.status, 302)
        XCTAssertEqual(h.headers["location"], "https://cdn.example:8443/a.mp4")
    }

    func testAddLine_newStatusLine_resetsHeadersOfTheRedirect() {
        let h = parse(["HTTP/1.1 301 Moved Permanently\r\n", "Location: https://b.example/x\r\n",
                       "ETag: \"redirect\"\r\n", "Content-Length: 0\r\n", "\r\n",
                       "HTTP/1.1 200 OK\r\n", "Content-Length: 5000\r\n", "\r\n"])
        XCTAssertEqual(h.status, 200)
        XCTAssertEqual(h.headers, ["content-length": "5000"])
        XCTAssertNil(h.etag)
    }

    func testAddLine_repeatedHeader_keepsTheLastValue() {
        let h = parse(["HTTP/1.1 200 OK\r\n", "ETag: \"one\"\r\n", "etag: \"two\"\r\n"])
        XCTAssertEqual(h.etag, "\"two\"")
    }

    func testAddLine_statusLineWithoutCodeOrReason_parsesWhatIsThere() {
        XCTAssertEqual(parse(["HTTP/1.1 204\r\n"]).status, 204)
        XCTAssertEqual(parse(["HTTP/1.1\r\n"]).status, 0)
        XCTAssertEqual(parse(["HTTP/1.1 abc\r\n"]).status, 0)
    }

    func testAddLine_lineWithoutColon_isIgnored() {
        let h = parse(["HTTP/1.1 200 OK\r\n", "garbage line\r\n", "\r\n"])
        XCTAssertEqual(h.headers, [:])
    }
}
