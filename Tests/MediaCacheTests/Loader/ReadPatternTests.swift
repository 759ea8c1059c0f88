// ReadPattern's windows: what a handle's fetches reach ahead of its reads,
// after a seek and along a stream, with and without a far link.
@testable import MediaCache
@testable import MediaStore
@testable import MediaNetwork
@testable import MediaSupport
import XCTest

final class ReadPatternTests: XCTestCase {
    private static let KiB: Int64 = 1 << 10
    private static let MiB: Int64 = 1 << 20

    /// Reads `count` bytes from `offset` in `piece`-sized reads, as the kernel sends them.
    private func stream(_ pattern: ReadPattern, from offset: Int64, count: Int64, piece: Int64) {
        var at = offset
        while at < offset + count {
            _ = pattern.record(offset: at, end: at + piece)
            at += piece
        }
    }

    func testFirstReadAfterASeekFetchesAtMostLinkStartOfAFastLinksRoundTrip() {
        let pattern = ReadPattern()
        stream(pattern, from: 0, count: 8 * Self.MiB, piece: 128 * Self.KiB)
        XCTAssertTrue(pattern.record(offset: 80 * Self.MiB, end: 80 * Self.MiB + 36 * Self.KiB))
        XCTAssertEqual(pattern.fetchWindow(bytesPerRoundTrip: 8 * Self.MiB), ReadPattern.linkStart)
    }

    func testLinkWindowGrowsWithTheStreakUpToTheRoundTrip() {
        let pattern = ReadPattern()
        stream(pattern, from: 50 * Self.MiB, count: 6 * Self.MiB, piece: 128 * Self.KiB)
        XCTAssertEqual(pattern.fetchWindow(bytesPerRoundTrip: 8 * Self.MiB), 3 * Self.MiB)
        stream(pattern, from: 56 * Self.MiB, count: 26 * Self.MiB, piece: 128 * Self.KiB)
        XCTAssertEqual(pattern.fetchWindow(bytesPerRoundTrip: 8 * Self.MiB), 16 * Self.MiB,
                       "the handle's own window, once larger, wins")
        XCTAssertEqual(pattern.fetchWindow(bytesPerRoundTrip: 0), 16 * Self.MiB)
    }

    func testASlowLinksRoundTripIsFetchedWholeFromTheFirstSequentialRead() {
        let pattern = ReadPattern()
        XCTAssertTrue(pattern.record(offset: 80 * Self.MiB, end: 80 * Self.MiB + 36 * Self.KiB))
        XCTAssertEqual(pattern.fetchWindow(bytesPerRoundTrip: 625_000), 625_000)
    }

    func testRandomSmallReadsFetchOnlyWhatTheyAsk() {
        let pattern = ReadPattern()
        for offset in stride(from: Int64(0), to: 400 * Self.MiB, by: Int(40 * Self.MiB)) {
            _ = pattern.record(offset: offset, end: offset + 4 * Self.KiB)
            XCTAssertEqual(pattern.fetchWindow(bytesPerRoundTrip: 8 * Self.MiB), 0, "read at \(offset)")
        }
    }
}
