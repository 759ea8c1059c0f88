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
        func ask(_ remaining: Int64) -> Int {
            SFTPSession.ask(remaining: remaining, streaming: false, ahead: SFTPReadAhead.most, buffer: buffer)
        }
        XCTAssertEqual(ask(4_096), 4_096)
        XCTAssertEqual(ask(100_000), SFTPSession.minReadAsk)
        XCTAssertEqual(ask(800_000), 200_000)
        XCTAssertEqual(ask(64 << 20), SFTPSession.maxReadAsk, "a read that is no stream's window asks 1 MiB ahead at most")
    }

    func testAStreamingWindowsCalls_askAQuarterOfTheSessionsAskAhead_withinWhatIsLeft() {
        let buffer = SFTPSession.readBufferSize
        XCTAssertEqual(SFTPSession.ask(remaining: 64 << 20, streaming: true, ahead: 1 << 20, buffer: buffer), 256 << 10)
        XCTAssertEqual(SFTPSession.ask(remaining: 64 << 20, streaming: true, ahead: SFTPReadAhead.most, buffer: buffer),
                       buffer)
        XCTAssertEqual(SFTPSession.ask(remaining: 4_096, streaming: true, ahead: SFTPReadAhead.most, buffer: buffer), 4_096)
    }

    func testTheAskAhead_growsWhileItBoundsAWindow_andFallsToTwoOfTheLinksRoundTrips() {
        let rtt = 0.1
        var ahead = SFTPReadAhead()
        XCTAssertEqual(ahead.bytes, 1 << 20)
        // 400 Mbit/s (50 MB/s, 5 MB a round trip): each window came at the
        // whole ask-ahead a round trip, so it doubles, up to libssh2's bound.
        var steps: [Int] = []
        for _ in 0..<4 {
            let perRoundTrip = min(Double(ahead.bytes), 5e6)
            ahead.windowRead(count: 32 << 20, seconds: Double(32 << 20) / perRoundTrip * rtt, roundTrip: rtt)
            steps.append(ahead.bytes)
        }
        XCTAssertEqual(steps, [2 << 20, 4 << 20, 8 << 20, 8 << 20])
        // Then 50 Mbit/s (625 KB a round trip): two of its round trips, not less than the start.
        ahead.windowRead(count: 8 << 20, seconds: Double(8 << 20) / 6.25e6, roundTrip: rtt)
        XCTAssertEqual(ahead.bytes, 1_250_000)
        ahead.windowRead(count: 8 << 20, seconds: Double(8 << 20) / 6.25e6, roundTrip: rtt)
        XCTAssertEqual(ahead.bytes, 1_250_000, "the link's bound: no growth")
        ahead.windowRead(count: 8 << 20, seconds: Double(8 << 20) / 2e6, roundTrip: rtt)
        XCTAssertEqual(ahead.bytes, SFTPReadAhead.least)
        // Nothing judged without a round trip or on a small window.
        var fresh = SFTPReadAhead()
        fresh.windowRead(count: 32 << 20, seconds: 0.1, roundTrip: nil)
        fresh.windowRead(count: 64 << 10, seconds: 0.0001, roundTrip: rtt)
        XCTAssertEqual(fresh.bytes, SFTPReadAhead.least)
    }

    func testOnlyAFilesGETAndHEADOverSFTP_areReadOnLibssh2() {
        XCTAssertTrue(SFTPFetcher.reads(FetchRequest(url: "sftp://u@h:2222/a/b.mkv", range: 0..<10)))
        XCTAssertTrue(SFTPFetcher.reads(FetchRequest(url: "sftp://h/a", method: .head)))
        XCTAssertFalse(SFTPFetcher.reads(FetchRequest(url: "ftp://h/a")))
        XCTAssertFalse(SFTPFetcher.reads(FetchRequest(url: "https://h/a")))
    }
}
