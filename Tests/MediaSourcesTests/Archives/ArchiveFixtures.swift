// The archive fixtures no one here wrote (rarfile's test archives, what
// unar extracts from them, ZIPs from Python's zipfile), found through
// MEDIAFS_RARFILE_FIXTURES as scripts/fetch-archive-fixtures.sh leaves
// them. Missing, they fail the test under CI=true and skip it loudly
// elsewhere. Also: an index driven as a caller would drive it, reading
// what it wants round after round.
import Foundation
import XCTest
@testable import MediaSources
@testable import MediaStore
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport

enum ArchiveFixtures {
    static let variable = "MEDIAFS_RARFILE_FIXTURES"

    static func directory(file: StaticString = #filePath, line: UInt = #line) throws -> URL {
        let environment = ProcessInfo.processInfo.environment
        let hint = "\(variable) is not set to a directory of archive fixtures: run scripts/fetch-archive-fixtures.sh and export what it prints"
        guard let path = environment[variable], !path.isEmpty,
              FileManager.default.fileExists(atPath: path + "/rar/rar5-vols.part1.rar") else {
            if environment["CI"] == "true" {
                XCTFail(hint, file: file, line: line)
                throw MediaError(ENOENT, hint)
            }
            print("SKIPPED: \(hint)")
            throw XCTSkip(hint)
        }
        return URL(fileURLWithPath: path)
    }

    static func bytes(_ relative: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: try directory().appendingPathComponent(relative)))
    }

    /// An index driven as a caller drives it: each volume's first
    /// `head` bytes and last `tail`, then round after round of the ranges
    /// it wants. Returns the index and how many rounds of reads it took
    /// (the first, heads and tails together, is one).
    static func drive(_ files: [(name: String, bytes: [UInt8])], head: Int = 64 << 10, tail: Int = 0,
                      _ index: ([ArchiveVolume]) throws -> ArchiveIndex) throws -> (ArchiveIndex, rounds: Int) {
        var volumes = try files.map { file in
            var volume = try ArchiveVolume(name: file.name, length: Int64(file.bytes.count),
                                           head: Array(file.bytes.prefix(head)))
            if tail > 0 { try volume.add(Array(file.bytes.suffix(tail)), at: Int64(max(0, file.bytes.count - tail))) }
            return volume
        }
        for round in 1...8 {
            let result = try index(volumes)
            if result.isComplete { return (result, round) }
            for wanted in result.wanted {
                let range = Int(wanted.range.lowerBound)..<Int(wanted.range.upperBound)
                try volumes[wanted.volume].add(Array(files[wanted.volume].bytes[range]), at: wanted.range.lowerBound)
            }
        }
        throw MediaError(EIO, "still wanting ranges after 8 rounds")
    }

    /// A member's bytes as its extents select them from whole volumes.
    static func contents(of member: ArchiveMember, in files: [(name: String, bytes: [UInt8])]) -> [UInt8] {
        member.extents.flatMap { extent in
            files[extent.volume].bytes[Int(extent.range.lowerBound)..<Int(extent.range.upperBound)]
        }
    }

    static func files(_ names: [String], under folder: String) throws -> [(name: String, bytes: [UInt8])] {
        try names.map { ($0, try bytes("\(folder)/\($0)")) }
    }
}
