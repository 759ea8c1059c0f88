// RAR5Index over rarfile's own RAR5 archives: a stored member split over
// three volumes served byte for byte as unar extracts it, whatever order
// the volumes come in; solid, compressed, encrypted-header, link and
// path-escaping members refused naming why; hostile bytes thrown, never a crash.
import Foundation
import XCTest
@testable import MediaSources
@testable import MediaStore
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport

final class RAR5ArchiveTests: XCTestCase {
    private let vols = ["rar5-vols.part1.rar", "rar5-vols.part2.rar", "rar5-vols.part3.rar"]

    func testAThreeVolumeSet_givesItsStoredMembers_byteForByteAsUnarExtractsThem() throws {
        let files = try ArchiveFixtures.files(vols, under: "rar")
        let (index, rounds) = try ArchiveFixtures.drive(files, RAR5Index.index)
        XCTAssertEqual(index.members.map(\.path), ["vols/bigfile.txt", "vols/smallfile.txt"])
        XCTAssertEqual(index.members.map(\.size), [205_000, 2_050])
        XCTAssertEqual(index.members.first?.extents.map(\.volume), [0, 1, 2])
        XCTAssertEqual(index.members.first?.mtime, 1_464_079_357) // 2016-05-24T08:42:37Z, as rarfile says
        XCTAssertEqual(index.refused, [])
        XCTAssertEqual(index.volumeOrder, [0, 1, 2])
        XCTAssertLessThanOrEqual(rounds, 2)
        for member in index.members {
            let expected = try ArchiveFixtures.bytes("extracted/rar5-vols.part1.rar/\(member.path)")
            XCTAssertEqual(ArchiveFixtures.contents(of: member, in: files), expected, member.path)
        }
    }

    func testVolumesGivenOutOfOrder_areOrderedByTheirHeaders_notTheirNames() throws {
        let files = try ArchiveFixtures.files(vols, under: "rar")
        let shuffled = [(name: "c.rar", bytes: files[2].bytes), (name: "a.rar", bytes: files[1].bytes),
                        (name: "b.rar", bytes: files[0].bytes)]
        let (index, _) = try ArchiveFixtures.drive(shuffled, RAR5Index.index)
        XCTAssertEqual(index.volumeOrder, [2, 1, 0])
        XCTAssertEqual(index.members.first?.extents.map(\.volume), [2, 1, 0])
        let expected = try ArchiveFixtures.bytes("extracted/rar5-vols.part1.rar/vols/bigfile.txt")
        XCTAssertEqual(ArchiveFixtures.contents(of: index.members[0], in: shuffled), expected)
    }

    func testAMissingMiddleVolume_refusesTheSplitMember_andServesTheOneWhollyPresent() throws {
        let files = try ArchiveFixtures.files([vols[0], vols[2]], under: "rar")
        let (index, _) = try ArchiveFixtures.drive(files, RAR5Index.index)
        XCTAssertEqual(index.members.map(\.path), ["vols/smallfile.txt"])
        XCTAssertEqual(index.refused.map(\.reason), [.missingVolume(1), .missingVolume(1)])
    }

    func testTwoCopiesOfOneVolume_throwThatTheVolumesDisagree() throws {
        let files = try ArchiveFixtures.files([vols[0], vols[1], vols[1]], under: "rar")
        XCTAssertThrowsError(try ArchiveFixtures.drive(files, RAR5Index.index)) { error in
            guard case .volumesDisagree(let what)? = error as? ArchiveRefusal else { return XCTFail("\(error)") }
            XCTAssertTrue(what.contains("volume 1"), what)
        }
    }

    func testASolidArchive_refusesItsMembers_asCompressedAndSolid() throws {
        let (index, _) = try ArchiveFixtures.drive(try ArchiveFixtures.files(["rar5-solid.rar"], under: "rar"), RAR5Index.index)
        XCTAssertEqual(index.members, [])
        XCTAssertEqual(index.refused, [.init(name: "stest1.txt", reason: .compressed(method: 3)),
                                       .init(name: "stest2.txt", reason: .solid)])
    }

    func testEncryptedHeaders_refuseTheWholeArchive() throws {
        let files = try ArchiveFixtures.files(["rar5-hpsw.rar"], under: "rar")
        XCTAssertThrowsError(try ArchiveFixtures.drive(files, RAR5Index.index)) { error in
            XCTAssertEqual(error as? ArchiveRefusal, .encryptedHeaders)
        }
    }

    func testASymlinkToDotDot_isRefusedAsALink_andTheFileBeneathItIsAPlainFile() throws {
        let files = try ArchiveFixtures.files(["rar5-evil-symlink-traversal.rar"], under: "rar")
        let (index, _) = try ArchiveFixtures.drive(files, RAR5Index.index)
        XCTAssertEqual(index.refused, [.init(name: "up", reason: .link)])
        XCTAssertEqual(index.members.map(\.path), ["up/pwned.txt"])
        XCTAssertEqual(String(decoding: ArchiveFixtures.contents(of: index.members[0], in: files), as: UTF8.self),
                       "ZIPSLIP-VIA-SYMLINK-OK\n")
    }

    func testFileCopyRecords_areRefusedAsLinks_andTheCompressedOriginalAsCompressed() throws {
        let (index, _) = try ArchiveFixtures.drive(try ArchiveFixtures.files(["rar5-dups.rar"], under: "rar"), RAR5Index.index)
        XCTAssertEqual(index.members, [])
        XCTAssertEqual(index.refused.first, .init(name: "stest1.txt", reason: .compressed(method: 3)))
        XCTAssertEqual(index.refused.dropFirst().map(\.reason), Array(repeating: .link, count: 8))
    }

    func testEveryTruncationAndEveryFlippedByteOfAHead_throwsOrIndexes_neverCrashes() throws {
        let files = try ArchiveFixtures.files(vols, under: "rar")
        let head = Array(files[0].bytes.prefix(200))
        for cut in 0..<head.count {
            _ = try? RAR5Index.index([try ArchiveVolume(name: "v", length: Int64(files[0].bytes.count), head: Array(head.prefix(cut)))])
        }
        for position in 0..<head.count {
            var mutated = head
            mutated[position] ^= 0xFF
            if let index = try? RAR5Index.index([try ArchiveVolume(name: "v", length: 102_400, head: mutated)]) {
                for member in index.members { XCTAssertTrue(member.extents.allSatisfy { $0.range.upperBound <= 102_400 }) }
            }
        }
    }

    func testAHeaderWithABadCRC_throwsNamingTheVolumeAndOffset() throws {
        var head = Array(try ArchiveFixtures.bytes("rar/\(vols[0])").prefix(4096))
        head[40] ^= 0x01
        XCTAssertThrowsError(try RAR5Index.index([try ArchiveVolume(name: "film.part1.rar", length: 102_400, head: head)])) { error in
            XCTAssertTrue("\(error)".contains("film.part1.rar at 30") && "\(error)".contains("CRC"), "\(error)")
        }
    }

    func testDataSizesPastTheVolumesEnd_throw_ratherThanGiveAnExtentOutside() throws {
        let head = Array(try ArchiveFixtures.bytes("rar/\(vols[0])").prefix(4096))
        XCTAssertThrowsError(try RAR5Index.index([try ArchiveVolume(name: "v", length: 5_000, head: head)])) { error in
            XCTAssertTrue("\(error)".contains("past the volume's end"), "\(error)")
        }
    }

    func testEncryptedData_isRefusedAsEncrypted_whateverItsMethod() throws {
        let (index, _) = try ArchiveFixtures.drive(try ArchiveFixtures.files(["rar5-psw.rar"], under: "rar"), RAR5Index.index)
        XCTAssertEqual(index.members, [])
        XCTAssertEqual(index.refused, [.init(name: "stest1.txt", reason: .encryptedData),
                                       .init(name: "stest2.txt", reason: .encryptedData)])
    }

    func testHardLinks_areRefusedAsLinks() throws {
        let (index, _) = try ArchiveFixtures.drive(try ArchiveFixtures.files(["rar5-hlink.rar"], under: "rar"), RAR5Index.index)
        XCTAssertEqual(index.refused.map(\.reason), [.compressed(method: 3), .link, .link])
    }

    func testSubdirectories_giveTheirFilesUnderUTF8Paths_andNoEntryForTheDirectories() throws {
        let (index, _) = try ArchiveFixtures.drive(try ArchiveFixtures.files(["rar5-subdirs.rar"], under: "rar"), RAR5Index.index)
        XCTAssertEqual(index.members.map(\.path), ["sub/dir2/file2.txt", "sub/with space/long fn.txt", "sub/üȵĩöḋè/file.txt",
                                                   "sub/dir1/file1.txt"])
        XCTAssertEqual(index.members.map(\.size), [6, 8, 5, 6])
        XCTAssertEqual(index.refused, [])
    }

    func testASelfExtractor_isFoundPastItsStub_inASecondRead_andItsStoredMemberIsAsUnarExtractsIt() throws {
        let files = try ArchiveFixtures.files(["rar5-crc.sfx"], under: "rar")
        let (index, rounds) = try ArchiveFixtures.drive(files, RAR5Index.index)
        XCTAssertEqual(rounds, 2, "the head, then the rest of where a stub may end")
        XCTAssertEqual(index.refused.map(\.reason), [.compressed(method: 3)])
        XCTAssertEqual(index.members.map(\.path), ["stest2.txt"])
        XCTAssertEqual(index.members.first?.extents.first.map { $0.range.lowerBound > 128_000 }, true)
        XCTAssertEqual(ArchiveFixtures.contents(of: index.members[0], in: files),
                       try ArchiveFixtures.bytes("extracted/rar5-crc.sfx/stest2.txt"))
    }

    func testHeadsTooShortToHoldTheMainHeaders_wantMore_ratherThanTakeEveryVolumeForTheFirst() throws {
        let files = try ArchiveFixtures.files(vols, under: "rar")
        let (index, rounds) = try ArchiveFixtures.drive(files, head: 10, RAR5Index.index)
        XCTAssertEqual(rounds, 2)
        XCTAssertEqual(index.volumeOrder, [0, 1, 2])
        XCTAssertEqual(index.members.map(\.size), [205_000, 2_050])
    }

    func testPartsWhoseSizesSumPastInt64_areRefused_notATrap() throws {
        // Three volumes of 2^62 bytes, each holding 2^62 - 100 bytes of one member that says it is 100 bytes.
        func vint(_ value: UInt64) -> [UInt8] {
            var value = value, out = [UInt8]()
            repeat { out.append(UInt8(value & 0x7F) | (value > 0x7F ? 0x80 : 0)); value >>= 7 } while value > 0
            return out
        }
        func block(_ type: UInt64, _ flags: UInt64, _ fields: [UInt8], data: UInt64? = nil) -> [UInt8] {
            let header = vint(type) + vint(flags | (data == nil ? 0 : 2)) + (data.map(vint) ?? []) + fields
            let sized = vint(UInt64(header.count)) + header
            return withUnsafeBytes(of: CRC32.checksum(sized).littleEndian, Array.init) + sized
        }
        let length: Int64 = 1 << 62
        let volumes = try (0..<3).map { number -> ArchiveVolume in
            let name = Array("big.bin".utf8)
            let file = vint(0) + vint(100) + vint(0) + vint(0) + vint(0) + vint(UInt64(name.count)) + name
            let split: UInt64 = (number > 0 ? 0x08 : 0) | (number < 2 ? 0x10 : 0)
            let head = RARSignature.rar5 + block(1, 0, vint(number > 0 ? 3 : 1) + (number > 0 ? vint(UInt64(number)) : []))
                + block(2, split, file, data: UInt64(length) - 100)
            return try ArchiveVolume(name: "big.part\(number + 1).rar", length: length, head: head)
        }
        let index = try RAR5Index.index(volumes)
        XCTAssertEqual(index.members, [])
        XCTAssertEqual(index.refused.count, 1)
        guard case .volumesDisagree? = index.refused.first?.reason else { return XCTFail("\(index.refused)") }
    }
}
