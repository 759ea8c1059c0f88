// Seeded fuzzing of the archive indexes with headers whose checksums are
// right, so hostile fields get past the CRC and into the parsers: sizes at
// and past every limit, split flags that chain nothing, names that escape.
// No input may trap; whatever indexes must give extents inside their
// volumes that sum to the member's size, under a safe path. Each test
// replays exactly from its seed.
import Foundation
import XCTest
@testable import MediaSources
@testable import MediaStore
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport

final class ArchiveFuzzTests: XCTestCase {
    private struct Random {
        var generator: SplitMix64
        mutating func below(_ bound: Int) -> Int { Int(generator.next() % UInt64(bound)) }
        mutating func chance(_ oneIn: Int) -> Bool { below(oneIn) == 0 }
        mutating func pick<T>(_ choices: [T]) -> T { choices[below(choices.count)] }
        mutating func number() -> UInt64 {
            pick([0, 1, 7, 100, 300, 0xFFFF, 0xFFFF_FFFF, 1 << 32, 1 << 62, (1 << 62) + 1, UInt64.max, generator.next(),
                  generator.next() >> UInt64(below(64))])
        }
        mutating func name() -> [UInt8] {
            Array(pick(["a.mkv", "vols/b.bin", "../x", "", "a//b", "/abs", "ok.txt", ".", "c:/w", "d\\..\\e",
                        "x\u{0}y", "é/ü.txt"]).utf8) + (chance(5) ? [0xFF, 0xC3] : [])
        }
    }

    private static func le(_ value: UInt64, _ count: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) }
    }

    private static func vint(_ value: UInt64) -> [UInt8] {
        var value = value, out = [UInt8]()
        repeat {
            out.append(UInt8(value & 0x7F) | (value > 0x7F ? 0x80 : 0))
            value >>= 7
        } while value > 0
        return out
    }

    private static func rar5Block(type: UInt64, flags: UInt64, fields: [UInt8], extra: [UInt8] = [], data: UInt64? = nil) -> [UInt8] {
        var header = vint(type) + vint(flags | (extra.isEmpty ? 0 : 1) | (data == nil ? 0 : 2))
        if !extra.isEmpty { header += vint(UInt64(extra.count)) }
        if let data { header += vint(data) }
        let sized = vint(UInt64(header.count + fields.count + extra.count)) + header + fields + extra
        return le(UInt64(CRC32.checksum(sized)), 4) + sized
    }

    /// One RAR5 volume of random file headers, and its length (at least its bytes).
    private func rar5Volume(_ random: inout Random, number: Int) -> (bytes: [UInt8], length: Int64) {
        var bytes = RARSignature.rar5
        bytes += Self.rar5Block(type: 1, flags: 0, fields: Self.vint(random.chance(4) ? 0 : 3) + Self.vint(UInt64(number)))
        for _ in 0..<random.below(4) {
            let name = random.name()
            let size = random.chance(2) ? UInt64(random.below(400)) : random.number()
            let dataSize = random.chance(2) ? size : random.number()
            var fields = Self.vint(random.pick([0, 0x02, 0x04, 0x06, 0x01, 0x08])) + Self.vint(size) + Self.vint(0)
            fields += Self.le(1_600_000_000, 4) + Self.le(0, 4)
            fields += Self.vint(random.chance(4) ? random.number() : 0) + Self.vint(1) + Self.vint(UInt64(name.count)) + name
            var extra = [UInt8]()
            if random.chance(5) { extra = Self.vint(2) + Self.vint(random.pick([1, 3, 5, 9])) + [0] }
            let split = UInt64(random.pick([0, 0x08, 0x10, 0x18]))
            bytes += Self.rar5Block(type: random.chance(10) ? 3 : 2, flags: split, fields: fields, extra: extra, data: dataSize)
            bytes += [UInt8](repeating: 0x41, count: Int(min(dataSize, 400)))
        }
        if random.chance(2) { bytes += Self.rar5Block(type: 5, flags: 0, fields: Self.vint(0)) }
        return (bytes, Int64(bytes.count + (random.chance(2) ? 0 : random.below(100_000))))
    }

    private func assertSound(_ index: ArchiveIndex, volumes: [ArchiveVolume], _ context: String) {
        let lengths = volumes.map(\.length)
        for member in index.members {
            XCTAssertTrue(member.extents.allSatisfy { $0.range.lowerBound >= 0 && $0.range.upperBound <= lengths[$0.volume] }, context)
            XCTAssertEqual(member.extents.reduce(0) { $0 + $1.count }, member.size, context)
            XCTAssertNoThrow(try ArchivePath.checked(member.path, backslashIsSeparator: true), context)
        }
        for wanted in index.wanted {
            XCTAssertTrue(wanted.range.upperBound <= lengths[wanted.volume], context)
            // Wanting what it has would have its caller loop for ever.
            XCTAssertNil(volumes[wanted.volume].bytes(wanted.range), context)
        }
    }

    func testRAR5Sets_ofHostileHeadersWithGoodCRCs_neverTrap_andIndexOnlySoundMembers() throws {
        var random = Random(generator: SplitMix64(seed: 0x5241_5235))
        var indexed = 0
        for step in 0..<4000 {
            let made = (0..<(1 + random.below(3))).map { rar5Volume(&random, number: $0 > 0 && random.chance(4) ? 0 : $0) }
            // Heads of at most 4 KiB, then what the index wants, read from
            // the volume's bytes (zeros past them), round after round.
            var volumes = try made.enumerated().map { index, volume in
                try ArchiveVolume(name: "v\(index)", length: volume.length, head: Array(volume.bytes.prefix(random.pick([64, 4096]))))
            }
            for round in 0..<4 {
                guard let index = try? RAR5Index.index(volumes) else { break }
                if round == 0 { indexed += 1 }
                assertSound(index, volumes: volumes, "step \(step), round \(round)")
                for wanted in index.wanted {
                    let bytes = made[wanted.volume].bytes
                    let read = (Int(wanted.range.lowerBound)..<Int(wanted.range.upperBound)).map { $0 < bytes.count ? bytes[$0] : 0 }
                    try volumes[wanted.volume].add(read, at: wanted.range.lowerBound)
                }
                if index.isComplete { break }
            }
        }
        XCTAssertGreaterThan(indexed, 400, "too few inputs got past the parser to test the bounds")
    }

    private static func rar4Block(type: UInt8, flags: UInt16, fields: [UInt8]) -> [UInt8] {
        let body = [type] + le(UInt64(flags), 2) + le(UInt64(7 + fields.count), 2) + fields
        return le(UInt64(CRC32.checksum(body) & 0xFFFF), 2) + body
    }

    func testRAR4Sets_ofHostileHeadersWithGoodCRCs_neverTrap_andIndexOnlySoundMembers() throws {
        var random = Random(generator: SplitMix64(seed: 0x5241_5234))
        var indexed = 0
        for step in 0..<4000 {
            var made = [(bytes: [UInt8], length: Int64)]()
            let count = 1 + random.below(3)
            for number in 0..<count {
                var bytes = RARSignature.rar4 + Self.rar4Block(type: 0x73, flags: random.chance(4) ? 0 : 0x01, fields: [0, 0, 0, 0, 0, 0])
                for _ in 0..<random.below(4) {
                    let name = random.name()
                    let packed = random.chance(2) ? UInt64(random.below(400)) : random.number()
                    let size = random.chance(2) ? packed : random.number()
                    let flags = UInt16(random.pick([0x8000, 0x8001, 0x8002, 0x8003, 0x8100, 0x8004, 0x8010, 0x80E0, 0x8200]))
                    var fields = Self.le(packed, 4) + Self.le(size, 4) + [3] + Self.le(0, 4) + Self.le(0x4A5A_5D52, 4)
                    fields += [20, random.chance(4) ? 0x33 : 0x30] + Self.le(UInt64(name.count), 2)
                    fields += Self.le(random.chance(8) ? 0xA1FF : 0x81B4, 4)
                    if flags & 0x100 != 0 { fields += Self.le(packed >> 32, 4) + Self.le(size >> 32, 4) }
                    bytes += Self.rar4Block(type: random.chance(6) ? 0x7A : 0x74, flags: flags, fields: fields + name)
                    bytes += [UInt8](repeating: 0x42, count: Int(min(packed & 0xFFFF_FFFF, 400)))
                }
                bytes += [UInt8](repeating: 0, count: random.below(3) * 50)
                let endFlags: UInt16 = (number + 1 < count ? 0x01 : 0) | (random.chance(5) ? 0 : 0x08)
                bytes += Self.rar4Block(type: 0x7B, flags: endFlags,
                                        fields: endFlags & 0x08 != 0 ? Self.le(UInt64(random.chance(5) ? 0 : number), 2) : [])
                made.append((bytes, Int64(bytes.count)))
            }
            let volumes = try made.enumerated().map { index, volume in
                try ArchiveVolume(name: "v\(index)", length: volume.length, head: volume.bytes)
            }
            if let index = try? RAR4Index.index(volumes) {
                indexed += 1
                assertSound(index, volumes: volumes, "step \(step)")
            }
        }
        XCTAssertGreaterThan(indexed, 250, "too few inputs got past the parser to test the bounds")
    }

    func testZips_withRandomFieldsOverwrittenByHostileNumbers_neverTrap_andIndexOnlySoundMembers() throws {
        var random = Random(generator: SplitMix64(seed: 0x5A49_5030))
        let originals = try ["stored.zip", "zip64.zip", "stub.zip", "descriptor.zip"].map { try ArchiveFixtures.bytes("zip/\($0)") }
        var indexed = 0
        for step in 0..<3000 {
            var bytes = random.pick(originals)
            for _ in 0..<(1 + random.below(3)) {
                // Mostly in the headers: the directory and end records at the end, local headers at the start.
                let position = random.chance(2) ? bytes.count - 1 - random.below(min(bytes.count, 300)) : random.below(bytes.count)
                let width = random.pick([1, 2, 4, 8])
                for (offset, byte) in Self.le(random.number(), width).enumerated() where position + offset < bytes.count {
                    bytes[position + offset] = byte
                }
            }
            let volume = try ArchiveVolume(name: "z", length: Int64(bytes.count), head: bytes)
            if let index = try? ZipIndex.index(volume) {
                indexed += 1
                assertSound(index, volumes: [volume], "step \(step)")
            }
        }
        XCTAssertGreaterThan(indexed, 300, "too few inputs got past the parser to test the bounds")
    }
}
