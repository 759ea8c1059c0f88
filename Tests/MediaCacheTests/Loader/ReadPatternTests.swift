// ReadPattern's windows: what a handle's fetches reach ahead of its reads,
// after a seek and along a stream, with and without a far link.
@testable import MediaCache
@testable import MediaSources
@testable import MediaSegmented
@testable import MediaStore
@testable import MediaNetwork
@testable import MediaSupport
import XCTest
@testable import MediaTestSupport

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

    func testAScannerReadingOnFetchesHalfItsRun_atPlacesWhatItReads_andAFrameExtractionALinksRoundTrip() {
        let scanner = ReadPattern(.scanner), extraction = ReadPattern(.frameExtraction)
        for pattern in [scanner, extraction] {
            stream(pattern, from: 4 * Self.MiB, count: 8 * Self.MiB, piece: 32 * Self.KiB)
            XCTAssertEqual(pattern.window, 0, "never a window of its own")
        }
        // A scan reading on, exactly: one long transfer held half its run
        // ahead; a frame extraction never has one.
        XCTAssertTrue(scanner.streams)
        XCTAssertEqual(scanner.cachedReadWindow, 4 * Self.MiB + 32 * Self.KiB)
        XCTAssertFalse(extraction.streams, "a thumbnail's frames: never a long transfer")
        // A demuxer reading on: half of its run, so it costs log1.5 round
        // trips, not one a read.
        XCTAssertEqual(scanner.fetchWindow(bytesPerRoundTrip: 625_000), 4 * Self.MiB + 32 * Self.KiB)
        let places = ReadPattern(.scanner)
        for offset in [0, 1, 5, 9].map({ Int64($0) * Self.MiB }) { _ = places.record(offset: offset, end: offset + 4_096) }
        XCTAssertEqual(places.fetchWindow(bytesPerRoundTrip: 625_000), 0, "reads at places: each its own bytes")
        XCTAssertFalse(places.streams)
        XCTAssertEqual(extraction.fetchWindow(bytesPerRoundTrip: 625_000), 625_000,
                       "a thumbnail's run of frames: a round trip of the link in each fetch")
        XCTAssertEqual(extraction.readClass, .scan)
    }

    func testTwoPlacesReadInTurnAreTwoStreamsEachWithItsWindow() {
        let pattern = ReadPattern()
        let video: Int64 = 10 * Self.MiB, audio: Int64 = 300 * Self.MiB
        _ = pattern.record(offset: video, end: video + Self.MiB)
        XCTAssertTrue(pattern.record(offset: audio, end: audio + Self.MiB), "the first read elsewhere is a jump")
        for k in Int64(1)..<12 {
            XCTAssertFalse(pattern.record(offset: video + k * Self.MiB, end: video + (k + 1) * Self.MiB),
                           "back to the video stream is a switch, not a jump")
            XCTAssertFalse(pattern.record(offset: audio + k * Self.MiB, end: audio + (k + 1) * Self.MiB))
        }
        XCTAssertEqual(pattern.window, 6 * Self.MiB, "the audio stream's own streak of 12 MiB")
        XCTAssertTrue(pattern.streams)
        // A third place: a jump; the older stream is forgotten.
        XCTAssertTrue(pattern.record(offset: 900 * Self.MiB, end: 900 * Self.MiB + Self.MiB))
        XCTAssertEqual(pattern.window, 0)
        XCTAssertFalse(pattern.record(offset: audio + 12 * Self.MiB, end: audio + 13 * Self.MiB),
                       "the audio stream is the other one now")
        XCTAssertEqual(pattern.window, 13 * Self.MiB / 2)
        XCTAssertTrue(pattern.record(offset: video + 12 * Self.MiB, end: video + 13 * Self.MiB),
                      "the video stream was forgotten")
    }

    func testRandomSmallReadsFetchOnlyWhatTheyAsk() {
        let pattern = ReadPattern()
        for offset in stride(from: Int64(0), to: 400 * Self.MiB, by: Int(40 * Self.MiB)) {
            _ = pattern.record(offset: offset, end: offset + 4 * Self.KiB)
            XCTAssertEqual(pattern.fetchWindow(bytesPerRoundTrip: 8 * Self.MiB), 0, "read at \(offset)")
        }
    }

    /// A scan's long transfer of a file with an index asks for its run and
    /// its read once more, 512 KiB at least and 8 MiB at most: its server
    /// sends all it may past the hold, read or not. An MPEG-TS's, whose demuxer reads on
    /// for its probe size, asks for 8 MiB; a player's for the rest of the file.
    func testAScansLongTransferIsSizedToItsRunUnlessTheFileIsATransportStream() {
        let length: Int64 = 100 * Self.MiB
        func end(_ piece: Int64, _ container: ContainerSniffer.Container?, _ readClass: ReadClass = .scan,
                 from start: Int64 = Self.MiB) -> Int64 {
            ReadPattern.longTransferEnd(from: start, piece: piece, readClass: readClass, container: container,
                                        length: length)
        }
        XCTAssertEqual(end(64 * Self.KiB, .matroska), Self.MiB + 512 * Self.KiB, "the least piece")
        XCTAssertEqual(end(Self.MiB, .mp4), 2 * Self.MiB, "its run and its read")
        XCTAssertEqual(end(9 * Self.MiB, nil), 9 * Self.MiB, "8 MiB at most")
        XCTAssertEqual(end(64 * Self.KiB, .mpegTS), 9 * Self.MiB, "a TS reads on")
        XCTAssertEqual(end(64 * Self.KiB, .matroska, from: length - 100), length, "never past the end")
        XCTAssertEqual(end(64 * Self.KiB, .matroska, .play), length, "a player's runs to the end")
        // The piece: the run of reads each starting where the last ended, and the last read again.
        let pattern = ReadPattern(readClass: .scan)
        _ = pattern.record(offset: 0, end: 32 * Self.KiB)
        _ = pattern.record(offset: 32 * Self.KiB, end: 64 * Self.KiB)
        XCTAssertEqual(pattern.scanPiece, 96 * Self.KiB)
        _ = pattern.record(offset: 64 * Self.KiB, end: 1088 * Self.KiB)
        XCTAssertEqual(pattern.scanPiece, 2112 * Self.KiB)
        _ = pattern.record(offset: 8 * Self.MiB, end: 8 * Self.MiB + 4096)
        XCTAssertEqual(pattern.scanPiece, 8192, "a seek starts a new run")
    }
}
