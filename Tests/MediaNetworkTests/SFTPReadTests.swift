import XCTest
@testable import MediaNetwork
@testable import MediaSupport

/// The pure parts of SFTPFetcher's reads: the head and what is left after
/// a dropped session, the size of each read call, which requests it takes.
/// The reads themselves run against a real sshd (integration/test_sftp.py).
final class SFTPReadTests: XCTestCase {
    func testARange_getsA206CutAtTheFilesEnd_andWhatIsLeftShrinksAsBytesArrive() {
        var progress = SFTPReadProgress(request: FetchRequest(url: "sftp://h/f", range: 100..<2_000))
        let head = progress.begin(size: 1_000, mtime: 1_700_000_000)
        XCTAssertEqual(head.status, 206)
        XCTAssertEqual(head.headers["content-range"], "bytes 100-999/*")
        XCTAssertEqual(head.headers["content-length"], "900")
        XCTAssertEqual(head.headers["last-modified"], HTTPDate.text(seconds: 1_700_000_000))
        XCTAssertEqual(progress.remaining, 100..<1_000)
        progress.delivered(400)
        XCTAssertEqual(progress.remaining, 500..<1_000, "a new session asks for the rest alone")
    }

    func testTheWholeFile_is200WithItsLength_andAHEADReadsNothing() {
        var whole = SFTPReadProgress(request: FetchRequest(url: "sftp://h/f"))
        XCTAssertEqual(whole.begin(size: 5, mtime: nil).status, 200)
        XCTAssertEqual(whole.remaining, 0..<5)
        var head = SFTPReadProgress(request: FetchRequest(url: "sftp://h/f", method: .head))
        XCTAssertEqual(head.begin(size: 5, mtime: nil).headers["content-length"], "5")
        XCTAssertNil(head.remaining)
    }

    /// The head is told once (with the first bytes), carrying what the
    /// open measured of the link; after a dropped session it is not told again.
    func testTheHead_isToldOnce_withTheRoundTripItWasBegunWith() {
        var progress = SFTPReadProgress(request: FetchRequest(url: "sftp://h/f", range: 0..<10))
        XCTAssertNil(progress.tell(), "nothing to tell before the file is open")
        progress.begin(size: 100, mtime: nil, roundTrip: .measured(0.1))
        XCTAssertFalse(progress.told)
        XCTAssertEqual(progress.tell()?.roundTrip, .measured(0.1))
        XCTAssertTrue(progress.told)
        XCTAssertNil(progress.tell())
        var kept = SFTPReadProgress(request: FetchRequest(url: "sftp://h/f"))
        XCTAssertEqual(kept.begin(size: 5, mtime: nil).roundTrip, .unknown, "a kept handle's answer times nothing")
    }

    func testARangePastTheEnd_isEmpty() {
        var progress = SFTPReadProgress(request: FetchRequest(url: "sftp://h/f", range: 10..<20))
        _ = progress.begin(size: 5, mtime: nil)
        XCTAssertEqual(progress.remaining?.isEmpty, true)
    }

    func testEachReadCall_asksAQuarterOfWhatIsLeft_withinItsBounds() {
        let buffer = SFTPSession.readBufferSize
        XCTAssertEqual(SFTPSession.ask(remaining: 4_096, buffer: buffer), 4_096)
        XCTAssertEqual(SFTPSession.ask(remaining: 100_000, buffer: buffer), SFTPSession.minReadAsk)
        XCTAssertEqual(SFTPSession.ask(remaining: 800_000, buffer: buffer), 200_000)
        XCTAssertEqual(SFTPSession.ask(remaining: 64 << 20, buffer: buffer), buffer)
    }

    func testOnlyAFilesGETAndHEADOverSFTP_areReadOnLibssh2() {
        XCTAssertTrue(SFTPFetcher.reads(FetchRequest(url: "sftp://u@h:2222/a/b.mkv", range: 0..<10)))
        XCTAssertTrue(SFTPFetcher.reads(FetchRequest(url: "sftp://h/a", method: .head)))
        XCTAssertFalse(SFTPFetcher.reads(FetchRequest(url: "ftp://h/a")))
        XCTAssertFalse(SFTPFetcher.reads(FetchRequest(url: "https://h/a")))
    }
}
