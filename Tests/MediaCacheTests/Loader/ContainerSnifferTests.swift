// ContainerSniffer: what a file's head says its demuxer reads next, for
// heads built here box by box and element by element (the integration
// suite checks it on files ffmpeg wrote), and what a hostile head gets.
@testable import MediaCache
@testable import MediaSources
@testable import MediaSegmented
import XCTest
@testable import MediaTestSupport

final class ContainerSnifferTests: XCTestCase {
    private static let MiB: Int64 = 1 << 20

    // MARK: MP4

    private func box(_ type: String, size: Int) -> [UInt8] {
        be(UInt64(size), 4) + Array(type.utf8) + [UInt8](repeating: 0, count: max(0, size - 8))
    }

    private func boxHeader(_ type: String, size: UInt32) -> [UInt8] { be(UInt64(size), 4) + Array(type.utf8) }

    private func be(_ value: UInt64, _ count: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: value >> (8 * UInt64(count - 1 - $0))) }
    }

    func testAnMP4WithMoovAfterMdatFetchesTheRestOfTheFileFromMdatsEnd() {
        let length: Int64 = 100 * Self.MiB
        let mdatSize: Int64 = 99 * Self.MiB
        let head = box("ftyp", size: 32) + box("free", size: 8) + boxHeader("mdat", size: UInt32(mdatSize))
        let moovAt = 40 + mdatSize
        XCTAssertEqual(ContainerSniffer.decide(head: head, length: length), .fetch(.mp4, [moovAt..<length]))
    }

    func testAnMP4WithALargesizeMdatIsWalkedByItsSixtyFourBitSize() {
        let length: Int64 = 6 << 30
        let mdatSize: Int64 = (5 << 30) + 123
        let head = box("ftyp", size: 24) + boxHeader("mdat", size: 1) + be(UInt64(mdatSize), 8)
        XCTAssertEqual(ContainerSniffer.decide(head: head, length: length),
                       .fetch(.mp4, [(24 + mdatSize)..<(24 + mdatSize + ContainerSniffer.maxBytes)]))
    }

    func testAnMP4WhoseMoovIsInTheHeadFetchesNothingAndOneRunningPastItFetchesItsRest() {
        let whole = box("ftyp", size: 24) + box("moov", size: 1000) + boxHeader("mdat", size: 5000)
        XCTAssertEqual(ContainerSniffer.decide(head: whole, length: 6024), .nothing)
        let big = box("ftyp", size: 24) + boxHeader("moov", size: 3_000_000)
        XCTAssertEqual(ContainerSniffer.decide(head: big, length: 50_000_000), .fetch(.mp4, [24..<3_000_024]))
    }

    func testAnMP4HeadCutInsideABoxHeaderNeedsMore() {
        let head = box("ftyp", size: 24) + Array(boxHeader("mdat", size: 1_000_000).prefix(5))
        XCTAssertEqual(ContainerSniffer.decide(head: head, length: 2_000_000), .needMore)
    }

    func testMP4BoxSizesPastTheFileOrBelowTheirHeaderFetchNothing() {
        let past = box("ftyp", size: 24) + boxHeader("mdat", size: 0xFFFF_FFF0)
        XCTAssertEqual(ContainerSniffer.decide(head: past, length: 1_000_000), .nothing)
        let small = box("ftyp", size: 24) + boxHeader("mdat", size: 4)
        XCTAssertEqual(ContainerSniffer.decide(head: small, length: 1_000_000), .nothing)
        let overflow = box("ftyp", size: 24) + boxHeader("mdat", size: 1) + be(UInt64.max, 8)
        XCTAssertEqual(ContainerSniffer.decide(head: overflow, length: 1_000_000), .nothing)
        let huge = box("ftyp", size: 24) + boxHeader("mdat", size: 1) + be(UInt64(Int64.max), 8)
        XCTAssertEqual(ContainerSniffer.decide(head: huge, length: 1_000_000), .nothing)
    }

    func testAFragmentedMP4FetchesNothing() {
        let head = box("ftyp", size: 24) + box("moov", size: 800) + boxHeader("moof", size: 2000)
        XCTAssertEqual(ContainerSniffer.decide(head: head, length: 10_000_000), .nothing)
    }

    func testAnMP4sFirstSampleIsItsMdatsDataOnlyWhenTheMoovFollowsIt() {
        let length: Int64 = 100 * Self.MiB
        let mdatFirst = box("ftyp", size: 32) + box("free", size: 8) + boxHeader("mdat", size: UInt32(99 * Self.MiB))
        XCTAssertEqual(ContainerSniffer.mp4FirstSample(head: mdatFirst, length: length), 48)
        let large = box("ftyp", size: 24) + boxHeader("mdat", size: 1) + be(UInt64(99 * Self.MiB), 8)
        XCTAssertEqual(ContainerSniffer.mp4FirstSample(head: large, length: length), 40)
        // The moov first, an mdat to the file's end (no moov after it), a
        // fragmented file, a cut head, a box past the file, no MP4 at all.
        let moovFirst = box("ftyp", size: 24) + box("moov", size: 1000) + boxHeader("mdat", size: 5000)
        XCTAssertNil(ContainerSniffer.mp4FirstSample(head: moovFirst, length: 6024))
        XCTAssertNil(ContainerSniffer.mp4FirstSample(head: box("ftyp", size: 24) + boxHeader("mdat", size: 0),
                                                     length: length))
        XCTAssertNil(ContainerSniffer.mp4FirstSample(head: box("ftyp", size: 24) + boxHeader("moof", size: 900),
                                                     length: length))
        XCTAssertNil(ContainerSniffer.mp4FirstSample(head: Array(mdatFirst.prefix(44)), length: length))
        XCTAssertNil(ContainerSniffer.mp4FirstSample(head: box("ftyp", size: 24) + boxHeader("mdat", size: 0xFFFF_FFF0),
                                                     length: 1_000_000))
        XCTAssertNil(ContainerSniffer.mp4FirstSample(head: Array(repeating: 0x47, count: 64), length: length))
    }

    // MARK: Matroska

    /// An element: ID bytes as written, a size in `sizeLength` bytes.
    private func element(_ id: UInt64, _ body: [UInt8], sizeLength: Int = 8) -> [UInt8] {
        var idBytes = be(id, 4)
        while idBytes.first == 0 { idBytes.removeFirst() }
        let marker = UInt64(1) << (7 * UInt64(sizeLength))
        return idBytes + be(marker | UInt64(body.count), sizeLength) + body
    }

    private func seekEntry(_ id: UInt64, _ position: UInt64) -> [UInt8] {
        var idBytes = be(id, 4)
        while idBytes.first == 0 { idBytes.removeFirst() }
        return element(0x4DBB, element(0x53AB, idBytes, sizeLength: 1) + element(0x53AC, be(position, 8), sizeLength: 1),
                       sizeLength: 1)
    }

    private func matroskaHead(targets: [(UInt64, UInt64)], unknownSegmentSize: Bool = true) -> (head: [UInt8], segmentData: Int64) {
        let ebml = element(0x1A45DFA3, element(0x4282, Array("matroska".utf8), sizeLength: 1), sizeLength: 1)
        let seekHead = element(0x114D9B74, targets.flatMap { seekEntry($0.0, $0.1) }, sizeLength: 2)
        let segmentHeader: [UInt8] = [0x18, 0x53, 0x80, 0x67] + (unknownSegmentSize ? [0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]
                                                                 : be((1 << 56) | 500_000_000, 8))
        let info = element(0x1549A966, [UInt8](repeating: 0, count: 40), sizeLength: 1)
        let cluster = element(0x1F43B675, [UInt8](repeating: 0, count: 100), sizeLength: 4)
        let head = ebml + segmentHeader + seekHead + info + cluster
        return (head, Int64(ebml.count + segmentHeader.count))
    }

    func testAMatroskaSeekHeadsTargetsNearTheEndAreFetchedToTheEndInOneRange() {
        let length: Int64 = 500 * Self.MiB
        let cues: UInt64 = 500 * 1 << 20 - 300_000
        let tags: UInt64 = cues + 200_000
        let (head, segmentData) = matroskaHead(targets: [(0x1549A966, 100), (0x1C53BB6B, cues), (0x1254C367, tags)])
        XCTAssertEqual(ContainerSniffer.decide(head: head, length: length),
                       .fetch(.matroska, [(segmentData + Int64(cues))..<length]))
    }

    func testMatroskaTargetsFarFromTheEndAreFetchedAGuessEachAndClustersAreNotTargets() {
        let length: Int64 = 4000 * Self.MiB
        let (head, segmentData) = matroskaHead(targets: [(0x1F43B675, 5000), (0x1C53BB6B, 1000 * 1 << 20),
                                                         (0x1254C367, 3000 * 1 << 20)])
        let guess = ContainerSniffer.targetGuess
        let cues = segmentData + 1000 * Self.MiB, tags = segmentData + 3000 * Self.MiB
        XCTAssertEqual(ContainerSniffer.decide(head: head, length: length),
                       .fetch(.matroska, [cues..<(cues + guess), tags..<(tags + guess)]))
    }

    func testMatroskaWithoutTargetsPastTheHeadFetchesNothing() {
        let (head, _) = matroskaHead(targets: [(0x1549A966, 10)])
        XCTAssertEqual(ContainerSniffer.decide(head: head, length: 10_000_000), .nothing)
    }

    func testAMatroskaHeadCutInsideTheSeekHeadNeedsMoreAndAtTheCapSaysNothing() {
        let (head, _) = matroskaHead(targets: [(0x1C53BB6B, 9_000_000)])
        let cut = Array(head.prefix(40))
        XCTAssertEqual(ContainerSniffer.decide(head: cut, length: 10_000_000), .needMore)
        // A whole-file head that stops there: nothing more will come.
        XCTAssertEqual(ContainerSniffer.decide(head: cut, length: 40), .nothing)
    }

    func testAMalformedMatroskaSeekHeadFetchesNothing() {
        var (head, _) = matroskaHead(targets: [(0x1C53BB6B, 9_000_000)])
        // The first Seek's size claims more than its SeekHead holds.
        let seekAt = head.firstIndex(of: 0x4D)!
        head[seekAt + 2] = 0xFE
        XCTAssertEqual(ContainerSniffer.decide(head: head, length: 10_000_000), .nothing)
        // A size field of eight zero bits (a vint longer than 8 bytes).
        var zero = matroskaHead(targets: [(0x1C53BB6B, 9_000_000)]).head
        zero[4] = 0
        XCTAssertEqual(ContainerSniffer.decide(head: zero, length: 10_000_000), .nothing)
    }

    func testSeekPositionsPastTheFileOrOverflowingAreDropped() {
        let (head, _) = matroskaHead(targets: [(0x1C53BB6B, UInt64(Int64.max) - 10), (0x1254C367, 1 << 40)])
        XCTAssertEqual(ContainerSniffer.decide(head: head, length: 10_000_000), .nothing)
    }

    // MARK: MPEG-TS and the rest

    private func transportStream(packet: Int, packets: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        for _ in 0..<packets {
            var p = [UInt8](repeating: 0xFF, count: packet)
            p[packet - 188] = 0x47
            bytes += p
        }
        return bytes
    }

    func testAnMPEGTSFetchesItsTailWhereFFmpegsDurationEstimateReads() {
        let length: Int64 = 100_000_000
        for packet in [188, 192] {
            XCTAssertEqual(ContainerSniffer.decide(head: transportStream(packet: packet, packets: 4), length: length),
                           .fetch(.mpegTS, [(length - 250_000)..<length]), "packets of \(packet)")
        }
        XCTAssertEqual(ContainerSniffer.decide(head: transportStream(packet: 188, packets: 4), length: 100_000),
                       .fetch(.mpegTS, [0..<100_000]))
    }

    func testASyncByteWithoutItsStrideIsNotATransportStream() {
        var head = [UInt8](repeating: 0, count: 1000)
        head[0] = 0x47
        XCTAssertEqual(ContainerSniffer.decide(head: head, length: 10_000_000), .nothing)
        XCTAssertEqual(ContainerSniffer.decide(head: Array(head.prefix(200)), length: 10_000_000), .needMore)
    }

    func testOtherBytesAreNoContainerAndAnEmptyHeadNeedsMore() {
        XCTAssertEqual(ContainerSniffer.decide(head: Array("RIFF\u{0}\u{0}\u{0}\u{0}AVI LIST".utf8), length: 1000), .nothing)
        XCTAssertEqual(ContainerSniffer.decide(head: [], length: 1000), .needMore)
        XCTAssertEqual(ContainerSniffer.decide(head: [], length: 0), .nothing)
    }

    // MARK: ContainerLookahead

    func testTheLookaheadCollectsTheHeadInOrderAcrossChunksAndPlansOnce() {
        let length: Int64 = 100_000_000
        let head = box("ftyp", size: 32) + boxHeader("mdat", size: 90_000_000)
        var lookahead = ContainerLookahead(cold: true)
        // Bytes further on are no head.
        XCTAssertFalse(head.withUnsafeBytes { lookahead.take($0, at: 1000..<1040, length: length) })
        XCTAssertFalse(head.prefix(20).withUnsafeBytes { lookahead.take($0, at: 0..<20, length: length) })
        XCTAssertEqual(lookahead.phase, .collecting)
        // Overlapping what it has: only the new bytes are taken.
        XCTAssertTrue(head.withUnsafeBytes { lookahead.take($0, at: 0..<40, length: length) })
        XCTAssertEqual(lookahead.phase, .planned([90_000_032..<length], .mp4))
        XCTAssertEqual(lookahead.takePlan()?.0, [90_000_032..<length])
        XCTAssertEqual(lookahead.firstSample, 40)
        XCTAssertNil(lookahead.takePlan())
        XCTAssertFalse(head.withUnsafeBytes { lookahead.take($0, at: 0..<40, length: length) })
    }

    func testAWarmFileHasNoLookahead() {
        var lookahead = ContainerLookahead(cold: false)
        let head = transportStream(packet: 188, packets: 4)
        XCTAssertFalse(head.withUnsafeBytes { lookahead.take($0, at: 0..<Int64(head.count), length: 10_000_000) })
        XCTAssertEqual(lookahead.phase, .done)
    }
}
