// RAR4Index over rarfile's own RAR 3.x volume sets (new .partN naming and
// old .rar/.r00/.r01): stored members split over three volumes served
// byte for byte as unar extracts them, volumes ordered by the numbers in
// their end blocks, the tails asked for when not given; hostile bytes
// thrown, never a crash.
import Foundation
import XCTest
@testable import MediaSources
@testable import MediaStore
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport

final class RAR4ArchiveTests: XCTestCase {
    private let vols = ["rar3-vols.part1.rar", "rar3-vols.part2.rar", "rar3-vols.part3.rar"]

    private func assertServesLikeUnar(_ names: [String], extractedFrom first: String,
                                      file: StaticString = #filePath, line: UInt = #line) throws {
        let files = try ArchiveFixtures.files(names, under: "rar")
        let (index, rounds) = try ArchiveFixtures.drive(files, tail: Int(RAR4Index.tailBytes), RAR4Index.index)
        XCTAssertEqual(index.members.map(\.path), ["vols/bigfile.txt", "vols/smallfile.txt"], file: file, line: line)
        XCTAssertEqual(index.members.map(\.size), [205_000, 2_050], file: file, line: line)
        XCTAssertEqual(index.refused, [], file: file, line: line)
        XCTAssertEqual(rounds, 1, "heads and tails given together suffice", file: file, line: line)
        for member in index.members {
            let expected = try ArchiveFixtures.bytes("extracted/\(first)/\(member.path)")
            XCTAssertEqual(ArchiveFixtures.contents(of: member, in: files), expected, member.path, file: file, line: line)
        }
    }

    func testANewStyleThreeVolumeSet_givesItsStoredMembers_byteForByteAsUnarExtractsThem() throws {
        try assertServesLikeUnar(vols, extractedFrom: "rar3-vols.part1.rar")
    }

    func testAnOldStyleSetGivenInNameOrder_isOrderedByItsEndBlocks_rarFirst() throws {
        try assertServesLikeUnar(["rar3-old.r00", "rar3-old.r01", "rar3-old.rar"], extractedFrom: "rar3-old.rar")
        let files = try ArchiveFixtures.files(["rar3-old.r00", "rar3-old.r01", "rar3-old.rar"], under: "rar")
        let (index, _) = try ArchiveFixtures.drive(files, tail: Int(RAR4Index.tailBytes), RAR4Index.index)
        XCTAssertEqual(index.volumeOrder, [2, 0, 1])
    }

    func testHeadsAlone_wantEachVolumesTail_thenIndexInASecondRound() throws {
        let files = try ArchiveFixtures.files(vols, under: "rar")
        let first = try RAR4Index.index(try files.map { try ArchiveVolume(name: $0.name, length: Int64($0.bytes.count), head: Array($0.bytes.prefix(65_536))) })
        XCTAssertEqual(first.members, [])
        XCTAssertEqual(first.wanted.map(\.range), [102_336..<102_400, 102_336..<102_400])
        let (index, rounds) = try ArchiveFixtures.drive(files, RAR4Index.index)
        XCTAssertEqual(rounds, 2)
        XCTAssertEqual(index.members.map(\.mtime), [1_464_090_157, 1_464_090_163]) // 2016-05-24 11:42:37, as rarfile reads the DOS time
    }

    func testAMissingLastVolume_refusesTheMemberThatGoesOnInIt() throws {
        let files = try ArchiveFixtures.files(Array(vols.prefix(2)), under: "rar")
        let (index, _) = try ArchiveFixtures.drive(files, tail: 64, RAR4Index.index)
        XCTAssertEqual(index.members, [])
        XCTAssertEqual(index.refused, [.init(name: "vols\\bigfile.txt", reason: .missingVolume(2))])
    }

    func testARAR5Volume_isRefusedByName() throws {
        let files = try ArchiveFixtures.files(["rar5-vols.part1.rar"], under: "rar")
        XCTAssertThrowsError(try ArchiveFixtures.drive(files, tail: 64, RAR4Index.index)) { error in
            XCTAssertTrue("\(error)".contains("rar5-vols.part1.rar: a RAR5 archive"), "\(error)")
        }
    }

    func testEveryTruncationAndEveryFlippedByteOfAHead_throwsOrIndexes_neverCrashes() throws {
        let whole = try ArchiveFixtures.bytes("rar/\(vols[2])")
        for cut in 0..<200 {
            _ = try? RAR4Index.index([try ArchiveVolume(name: "v", length: Int64(whole.count), head: Array(whole.prefix(cut)))])
        }
        for position in 0..<whole.count where position < 120 || position >= whole.count - 40 {
            var mutated = whole
            mutated[position] ^= 0xFF
            if let index = try? RAR4Index.index([try ArchiveVolume(name: "v", length: Int64(whole.count), head: mutated)]) {
                for member in index.members { XCTAssertTrue(member.extents.allSatisfy { $0.range.upperBound <= Int64(whole.count) }) }
            }
        }
    }

    func testAHeaderWithABadCRC_throwsNamingTheVolumeAndOffset() throws {
        var head = try ArchiveFixtures.bytes("rar/\(vols[2])")
        head[60] ^= 0x01
        XCTAssertThrowsError(try RAR4Index.index([try ArchiveVolume(name: "film.part3.rar", length: Int64(head.count), head: head)])) { error in
            XCTAssertTrue("\(error)".contains("film.part3.rar at 20") && "\(error)".contains("CRC"), "\(error)")
        }
    }

    func testACompressedUnicodeName_decodesAsUnrarDoes() {
        // "ä.txt": ASCII "a.txt", NUL, high byte 0, flags 0b01_00_00_00 then
        // one low byte with the high byte... all low bytes with high 0.
        let bytes: [UInt8] = Array("a.txt".utf8) + [0, 0x00, 0b0000_0000, 0xE4, 0x2E, 0x74, 0x78, 0, 0x74]
        XCTAssertEqual(RAR4Name.decode(bytes[...]), "ä.txt")
    }

    func testUnixSymlinks_areRefusedAsLinks_andTheFileBesideThemIsAsUnarExtractsIt() throws {
        let files = try ArchiveFixtures.files(["rar3-symlink-unix.rar"], under: "rar")
        let (index, _) = try ArchiveFixtures.drive(files, tail: 64, RAR4Index.index)
        XCTAssertEqual(index.refused, [.init(name: "data_link", reason: .link), .init(name: "random_link", reason: .link)])
        XCTAssertEqual(index.members.map(\.path), ["data.txt"])
        XCTAssertEqual(ArchiveFixtures.contents(of: index.members[0], in: files),
                       try ArchiveFixtures.bytes("extracted/rar3-symlink-unix.rar/data.txt"))
    }

    func testUnicodeNamesInRAR4sCompressedForm_readAsLsarListsThem() throws {
        let (index, _) = try ArchiveFixtures.drive(try ArchiveFixtures.files(["rar3-subdirs.rar"], under: "rar"), tail: 64, RAR4Index.index)
        XCTAssertEqual(index.members.map(\.path), ["sub/dir2/file2.txt", "sub/with space/long fn.txt", "sub/üȵĩöḋè/file.txt",
                                                   "sub/dir1/file1.txt"])
        XCTAssertEqual(index.refused, [])
    }

    func testASolidArchive_refusesItsSecondMemberAsSolid() throws {
        let (index, _) = try ArchiveFixtures.drive(try ArchiveFixtures.files(["rar3-solid.rar"], under: "rar"), tail: 64, RAR4Index.index)
        XCTAssertEqual(index.members, [])
        XCTAssertEqual(index.refused.map(\.reason), [.compressed(method: 3), .solid])
    }

    func testASelfExtractor_isFoundPastItsStub_andItsStoredMemberIsAsUnarExtractsIt() throws {
        let files = try ArchiveFixtures.files(["rar3-seektest.sfx"], under: "rar")
        let (index, rounds) = try ArchiveFixtures.drive(files, tail: 64, RAR4Index.index)
        XCTAssertEqual(rounds, 2, "the head and tail, then the rest of where a stub may end")
        XCTAssertEqual(index.refused.map(\.name), ["stest1.txt"])
        XCTAssertEqual(index.members.map(\.path), ["stest2.txt"])
        XCTAssertEqual(ArchiveFixtures.contents(of: index.members[0], in: files),
                       try ArchiveFixtures.bytes("extracted/rar3-seektest.sfx/stest2.txt"))
    }
}
