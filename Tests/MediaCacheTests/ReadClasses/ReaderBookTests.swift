// Who reads what: a reader's command line made short and free of secrets,
// one account per process and file, live until its last close, listed a
// while after, bounded in number, and totals by name that never go back.
import XCTest
@testable import MediaCache
@testable import MediaSupport
@testable import MediaTestSupport

final class ReaderBookTests: XCTestCase {
    private func process(_ pid: Int32, _ name: String = "ffmpeg") -> ReaderProcess {
        ReaderProcess(pid: pid, startTime: 1, name: name, arguments: name, parentName: "jellyfin")
    }

    func testShortForm_dropsURLSecretsAndCutsLongArguments() {
        let short = ReaderProcess.shortForm([
            "/usr/lib/plexmediaserver/Plex Transcoder", "-progressurl",
            "http://127.0.0.1:32400/video/:/transcode/session/abc/progress?X-Plex-Token=SECRET",
            "-i", "https://user:p4ss@host.example/films/a.mkv#frag", "", String(repeating: "x", count: 100),
        ])
        XCTAssertFalse(short.contains("SECRET"), short)
        XCTAssertFalse(short.contains("p4ss"), short)
        XCTAssertFalse(short.contains("user"), short)
        XCTAssertTrue(short.hasPrefix("Plex Transcoder -progressurl http://127.0.0.1:32400/video/"), short)
        XCTAssertTrue(short.contains("https://host.example/films/a.mkv "), short)
        XCTAssertLessThanOrEqual(short.utf8.count, ReaderProcess.argumentsLimit)
        XCTAssertTrue(short.hasSuffix("…"), "cut: \(short)")
        XCTAssertEqual(ReaderProcess.shortForm(["cat", "/mnt/ä.mkv"]), "cat /mnt/ä.mkv")
        XCTAssertEqual(ReaderProcess.shortForm([]), "")
        XCTAssertEqual(ReaderProcess.shortForm(["python3", "-c", "import os\nx\t1"]), "python3 -c import os x 1")
        XCTAssertEqual(ReaderProcess.cut("ääää", to: 6), "ä…", "cut at a character, never inside one")
    }

    func testAnAccountPerProcessAndFile_liveUntilItsLastClose_listedAWhileAfter() {
        let clock = TestClock()
        let book = ReaderBook(clock: clock.clock)
        let a1 = book.opened(by: process(10), as: .play, file: "/a.mkv")
        let a2 = book.opened(by: process(10), as: .play, file: "/a.mkv")
        let b = book.opened(by: process(11), as: .scan, file: "/a.mkv")
        XCTAssertTrue(a1 === a2, "a second handle of the same process and file shares its account")
        XCTAssertEqual(a1.openHandles, 2)
        a1.countRead(100)
        b.countRead(10)
        b.countFetched(5)
        book.closed(a1)
        XCTAssertNil(a1.endedAt, "one handle is still open")
        book.closed(b)
        XCTAssertNotNil(b.endedAt)
        XCTAssertEqual(book.readers().map(\.process.pid), [10, 11], "live first")
        clock.advance(ReaderBook.recentFor + 1)
        XCTAssertEqual(book.readers().map(\.process.pid), [10], "an ended reader is listed for a while")
        let totals = book.totals()
        XCTAssertEqual(totals["play/ffmpeg"], ReaderBook.Totals(read: 100, fetched: 0))
        XCTAssertEqual(totals["scan/ffmpeg"], ReaderBook.Totals(read: 10, fetched: 5), "a reader let go still counts")
    }

    func testTheBookIsBounded_endedReadersGoFirst_namesPastTheBoundAreOther() {
        let book = ReaderBook(clock: TestClock().clock)
        let live = book.opened(by: process(1, "mpv"), as: .play, file: "/live")
        for pid in Int32(2)...Int32(ReaderBook.capacity + 50) {
            let account = book.opened(by: process(pid, "p\(pid % 40)"), as: .play, file: "/f")
            account.countRead(1)
            book.closed(account)
        }
        let listed = book.readers()
        XCTAssertEqual(listed.count, ReaderBook.capacity)
        XCTAssertTrue(listed.contains { $0 === live }, "a live reader is never let go")
        let totals = book.totals()
        XCTAssertLessThanOrEqual(totals.count, ReaderBook.maxNames + 1)
        XCTAssertEqual(totals.values.reduce(0) { $0 + $1.read }, Int64(ReaderBook.capacity + 49),
                       "every byte read counted once")
        XCTAssertNotNil(totals["play/other"])
    }

    func testMetricLabels_escapeWhatTheTextFormatEscapes() {
        XCTAssertEqual(MetricsExposition.readerLabels("play/a\"b\\c\nd"), "class=\"play\",process=\"a\\\"b\\\\c\\nd\"")
        XCTAssertEqual(MetricsExposition.readerLabels("scan/Plex Media Scan"), "class=\"scan\",process=\"Plex Media Scan\"")
    }
}
