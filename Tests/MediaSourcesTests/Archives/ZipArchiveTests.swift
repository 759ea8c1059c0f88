// ZipIndex over ZIPs Python's zipfile made (scripts/fetch-archive-fixtures.sh):
// stored members byte for byte, with forced ZIP64 (local extra unlike the
// central one), a prepended stub, data descriptors, a UTF-8 name; each in
// the rounds a caller reads (tail, central directory, local headers);
// hostile bytes thrown, never a crash.
import Foundation
import XCTest
@testable import MediaSources
@testable import MediaStore
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport

final class ZipArchiveTests: XCTestCase {
    private let expectedPaths = ["film/a.bin", "café.txt", "empty"]

    private func assertServesAsWritten(_ name: String, file: StaticString = #filePath, line: UInt = #line) throws -> Int {
        let files = try ArchiveFixtures.files([name], under: "zip")
        // Nothing of the head: a caller starts at the tail.
        let (index, rounds) = try ArchiveFixtures.drive(files, head: 0, tail: Int(ZipIndex.tailBytes)) { try ZipIndex.index($0[0]) }
        XCTAssertEqual(index.members.map(\.path), expectedPaths, file: file, line: line)
        XCTAssertEqual(index.refused, [], file: file, line: line)
        for member in index.members {
            let expected = try ArchiveFixtures.bytes("zip/expected/\(member.path)")
            XCTAssertEqual(member.size, Int64(expected.count), member.path, file: file, line: line)
            XCTAssertEqual(ArchiveFixtures.contents(of: member, in: files), expected, member.path, file: file, line: line)
        }
        XCTAssertEqual(index.members.first?.mtime, 1_589_718_644, file: file, line: line) // 2020-05-17 12:30:44, as written
        return rounds
    }

    func testAStoredZip_givesItsMembersByteForByte_inTwoRounds() throws {
        // Small enough that the tail holds the directory and the local headers.
        // Called outside the assertion: a skip thrown inside one counts as a failure.
        let rounds = try assertServesAsWritten("stored.zip")
        XCTAssertEqual(rounds, 1)
    }

    func testAForcedZip64Zip_readsTheZip64RecordAndExtras_andTheLocalExtraPlacesTheData() throws {
        _ = try assertServesAsWritten("zip64.zip")
    }

    func testAZipAfterAStub_shiftsEveryOffsetByTheStubsLength() throws {
        _ = try assertServesAsWritten("stub.zip")
    }

    func testDataDescriptors_leaveTheSizesToTheCentralDirectory() throws {
        _ = try assertServesAsWritten("descriptor.zip")
    }

    func testABigZipReadFromItsTail_wantsTheDirectoryThenTheLocalHeaders() throws {
        let stored = try ArchiveFixtures.bytes("zip/stored.zip")
        let padding = [UInt8](repeating: 0, count: 200_000)
        // The same archive after 200,000 bytes of stub, read 100 bytes at its end first.
        let whole = padding + stored
        var volume = try ArchiveVolume(name: "big.zip", length: Int64(whole.count), head: [])
        try volume.add(Array(whole.suffix(100)), at: Int64(whole.count - 100))
        var rounds = 0
        var index = try ZipIndex.index(volume)
        while !index.isComplete, rounds < 5 {
            rounds += 1
            for wanted in index.wanted {
                try volume.add(Array(whole[Int(wanted.range.lowerBound)..<Int(wanted.range.upperBound)]), at: wanted.range.lowerBound)
            }
            index = try ZipIndex.index(volume)
        }
        XCTAssertEqual(rounds, 2, "the directory (the tail holds the end record), then the local headers")
        XCTAssertEqual(index.members.map(\.path), expectedPaths)
        XCTAssertEqual(index.members.first?.extents.first?.range.lowerBound, 200_000 + 30 + 10)
    }

    func testAZip64ReadFromATailShortOfItsRecord_wantsTheRecordWhereTheLocatorSays() throws {
        let whole = try ArchiveFixtures.bytes("zip/zip64.zip")
        var volume = try ArchiveVolume(name: "z64", length: Int64(whole.count), head: [])
        try volume.add(Array(whole.suffix(42)), at: Int64(whole.count - 42)) // the end record and the locator only
        var asked = [Range<Int64>]()
        var rounds = 0
        var index = try ZipIndex.index(volume)
        while !index.isComplete, rounds < 6 {
            rounds += 1
            for wanted in index.wanted {
                asked.append(wanted.range)
                try volume.add(Array(whole[Int(wanted.range.lowerBound)..<Int(wanted.range.upperBound)]), at: wanted.range.lowerBound)
            }
            index = try ZipIndex.index(volume)
        }
        XCTAssertEqual(asked.first, Int64(whole.count - 98)..<Int64(whole.count - 42), "the ZIP64 end record first")
        XCTAssertEqual(rounds, 3, "then the directory, then the local headers")
        XCTAssertEqual(index.members.map(\.path), expectedPaths)
    }

    func testCompressedAndTraversingMembers_areRefusedNamingWhy() throws {
        let made = try zip([("../up.txt", 0), ("ok.txt", 0), ("packed.txt", 8), ("/abs", 0)])
        let index = try ZipIndex.index(try ArchiveVolume(name: "z", length: Int64(made.count), head: made))
        XCTAssertEqual(index.members.map(\.path), ["ok.txt"])
        XCTAssertEqual(index.refused, [.init(name: "../up.txt", reason: .unsafePath("../up.txt")),
                                       .init(name: "packed.txt", reason: .compressed(method: 8)),
                                       .init(name: "/abs", reason: .unsafePath("/abs"))])
    }

    func testEveryTruncationAndEveryFlippedByte_throwsOrIndexes_neverCrashes() throws {
        for name in ["stored.zip", "zip64.zip", "stub.zip"] {
            let whole = try ArchiveFixtures.bytes("zip/\(name)")
            for position in 0..<whole.count where position < 200 || position >= whole.count - 400 {
                var mutated = whole
                mutated[position] ^= 0xFF
                if let index = try? ZipIndex.index(try ArchiveVolume(name: name, length: Int64(whole.count), head: mutated)) {
                    for member in index.members { XCTAssertTrue(member.extents.allSatisfy { $0.range.upperBound <= Int64(whole.count) }) }
                }
            }
            for cut in stride(from: 0, to: whole.count, by: 7) {
                _ = try? ZipIndex.index(try ArchiveVolume(name: name, length: Int64(cut), head: Array(whole.prefix(cut))))
            }
        }
    }

    /// A ZIP of empty members with these names and methods, written here
    /// byte by byte (only for refusals: the readers' fixtures cover the rest).
    private func zip(_ entries: [(name: String, method: UInt16)]) throws -> [UInt8] {
        func le(_ value: Int, _ count: Int) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }
        var out = [UInt8](), central = [UInt8]()
        for entry in entries {
            let name = Array(entry.name.utf8)
            central += le(0x0201_4B50, 4) + le(20, 2) + le(20, 2) + le(0, 2) + le(Int(entry.method), 2) + le(0, 8)
                + le(0, 8) + le(name.count, 2) + le(0, 6) + le(0, 6) + le(out.count, 4) + name
            out += le(0x0403_4B50, 4) + le(20, 2) + le(0, 2) + le(Int(entry.method), 2) + le(0, 16) + le(name.count, 2) + le(0, 2) + name
        }
        let start = out.count
        out += central
        out += le(0x0605_4B50, 4) + le(0, 4) + le(entries.count, 2) + le(entries.count, 2) + le(central.count, 4) + le(start, 4) + le(0, 2)
        return out
    }
}
