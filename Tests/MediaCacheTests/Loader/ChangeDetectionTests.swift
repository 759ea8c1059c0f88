// How a change on the server is told (ChangeDetection), without a loader:
// each rule as a table of evidence and verdicts. `difference`'s own table
// is VersionTests.testDifference_namesEveryKindOfEvidenceAndOnlyThose.
import Foundation
import XCTest
@testable import MediaCache
@testable import MediaNetwork
@testable import MediaStore
@testable import MediaTestSupport

final class ChangeDetectionTests: XCTestCase {
    private let monday = "Mon, 30 Nov 2026 10:00:00 GMT", tuesday = "Tue, 01 Dec 2026 10:00:00 GMT"

    private func info(etag: String? = nil, date: String? = nil, length: Int64 = 100) -> ContentInfo {
        ContentInfo(length: length, etag: etag, lastModified: date)
    }

    func testAListing_isAChangeOnlyOnEvidenceBothSidesCarry() {
        let cases: [(known: ContentInfo, listed: ContentInfo, changed: Bool, why: String)] = [
            (info(etag: "\"a\""), info(etag: "\"a\""), false, "same ETag"),
            (info(etag: "W/\"a\""), info(etag: "\"a\""), false, "weak and strong forms of one ETag"),
            (info(etag: "\"a\""), info(etag: "\"b\""), true, "another ETag"),
            (info(etag: "\"a\""), info(etag: "\"a\"", length: 101), true, "another length"),
            (info(etag: "\"a\"", date: monday), info(date: tuesday), true, "no listed ETag, another second"),
            (info(etag: "\"a\""), info(), false, "a listing without validators shows nothing gone"),
            (info(date: monday), info(date: "Mon, 30 Nov 2026 10:00:00 GMT"), false, "the same second"),
            (info(date: monday), info(), false, "no listed date"),
        ]
        for c in cases {
            let found = ChangeDetection.listed(c.listed, against: c.known)
            XCTAssertEqual(found != nil, c.changed, "\(c.why): \(found ?? "no change")")
        }
    }

    func testAHead_describesTheFileOnlyWhenItIs2xx_withTheLengthItsStatusGives() {
        let known = info(etag: "\"a\"", length: 100)
        let cases: [(status: Int, headers: [String: String], changed: Bool, why: String)] = [
            (206, ["etag": "\"a\"", "content-range": "bytes 0-9/100"], false, "a range of the same version"),
            (206, ["etag": "\"a\"", "content-range": "bytes 0-9/101"], true, "a range of a longer file"),
            (206, ["etag": "\"b\"", "content-range": "bytes 0-9/100"], true, "another ETag"),
            (200, ["etag": "\"a\"", "content-length": "100"], false, "the whole body"),
            (200, ["etag": "\"a\"", "content-length": "99"], true, "a shorter whole body"),
            (404, ["etag": "\"x\"", "content-length": "12"], false, "an error page's validators are the page's"),
        ]
        for c in cases {
            let found = ChangeDetection.inHead(ResponseHead(status: c.status, headers: c.headers), against: known)
            XCTAssertEqual(found != nil, c.changed, "\(c.why): \(found ?? "no change")")
        }
    }

    func testAWholeBodyToARangeRequest_isAChangeOnlyAfterRangesOfThisVersion() {
        let whole = ResponseHead(status: 200, headers: ["content-length": "100"])
        let partial = ResponseHead(status: 206, headers: ["content-range": "bytes 0-9/100"])
        XCTAssertNotNil(ChangeDetection.wholeBody(whole, askedWithIfRange: true, after: true))
        XCTAssertNotNil(ChangeDetection.wholeBody(whole, askedWithIfRange: false, after: true), "ambiguous: a change")
        XCTAssertNil(ChangeDetection.wholeBody(whole, askedWithIfRange: true, after: false), "a server without ranges")
        XCTAssertNil(ChangeDetection.wholeBody(partial, askedWithIfRange: true, after: true))
    }

    func testAVersionKnownByItsLength_isConfirmedByItsFirstAnswer_onlyWithNothingToMix() {
        let byLength = ContentInfo(length: 100, contentType: "video/mp4")
        let answered = ContentInfo(length: 100, contentType: "video/x-matroska", etag: "\"a\"", lastModified: monday)
        let confirmed = ChangeDetection.confirmation(of: byLength, by: answered, sawPartial: false, hasBytes: false)
        XCTAssertEqual(confirmed?.etag, "\"a\"")
        XCTAssertEqual(confirmed?.lastModified, monday)
        XCTAssertEqual(confirmed?.contentType, "video/mp4", "the listing's type stays")
        XCTAssertNil(ChangeDetection.confirmation(of: byLength, by: answered, sawPartial: true, hasBytes: false))
        XCTAssertNil(ChangeDetection.confirmation(of: byLength, by: answered, sawPartial: false, hasBytes: true))
        XCTAssertNil(ChangeDetection.confirmation(of: byLength, by: info(etag: "\"a\"", length: 101), sawPartial: false,
                                                  hasBytes: false), "another length is a change, not a confirmation")
        XCTAssertNil(ChangeDetection.confirmation(of: info(etag: "\"a\""), by: answered, sawPartial: false,
                                                  hasBytes: false), "a version with validators is compared")
    }

    func testARangeAnsweredWithNoTotal_givesTheKnownLengthWithItsValidators_forAConfirmation() {
        // An FTP read listed by LIST: RemoteFileHead's 206 names no total.
        let byLength = ContentInfo(length: 1_000, acceptsRanges: true)
        let ftp = ResponseHead(status: 206, headers: ["content-range": "bytes 0-131/*", "last-modified": monday,
                                                      "accept-ranges": "bytes"])
        let answered = ChangeDetection.answered(ftp, known: byLength)
        XCTAssertEqual(answered, ContentInfo(length: 1_000, lastModified: monday, acceptsRanges: true))
        XCTAssertEqual(ChangeDetection.confirmation(of: byLength, by: answered!, sawPartial: false, hasBytes: false)?
            .lastModified, monday)
        XCTAssertNil(ChangeDetection.answered(ResponseHead(status: 206, headers: ["content-range": "bytes 990-1009/*"]),
                                              known: byLength), "a range past the known length says nothing")
        XCTAssertEqual(ChangeDetection.answered(ResponseHead(status: 206, headers: ["content-range": "bytes 0-9/50"]),
                                                known: byLength)?.length, 50, "a total given is the answer's")
        XCTAssertNil(ChangeDetection.answered(ResponseHead(status: 404, headers: [:]), known: byLength))
    }
}

