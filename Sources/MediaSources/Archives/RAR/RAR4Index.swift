// Lists a RAR4 (RAR 2.9/3.x) volume set's stored members as ranges of its
// volumes, from each volume's head and tail (and further ranges it asks
// for). RAR4 numbers a volume only in its end block, the last bytes of the
// volume: a caller reads each volume's last `tailBytes` with its head, or
// the index asks for them. Every header's CRC16 is checked, every size
// bounded. Pure: no network.
import Glibc
import MediaSupport
import Foundation
import MediaStore
import MediaNetwork

package enum RAR4Index {
    /// Enough of a volume's end to hold its end block (20 bytes as rar
    /// writes it: CRC, volume number, 7 reserved).
    package static let tailBytes: Int64 = 64
    static let readAhead: Int64 = 64 << 10

    package static func index(_ volumes: [ArchiveVolume]) throws -> ArchiveIndex {
        var walks = [RARVolumeWalk]()
        var wanted = [ArchiveExtent]()
        for (input, volume) in volumes.enumerated() {
            var (walk, number) = try self.walk(volume, input: input)
            if number == nil { number = try endBlockNumber(volume) }
            if let number {
                walk.number = number
                walk.numbered = true
            } else if volume.available(from: max(0, volume.length - tailBytes)) < min(tailBytes, volume.length) {
                let start = max(0, volume.length - tailBytes)
                wanted.append(ArchiveExtent(volume: input, range: start..<volume.length))
            } else if volumes.count > 1 {
                throw ArchiveRefusal.volumesDisagree("\(volume.name) gives no volume number; its place in the set cannot be told")
            } else {
                walk.numbered = true // The only volume: RAR 2 and single archives write no number.
            }
            walks.append(walk)
        }
        // Until every volume is numbered, their order is not known.
        if !wanted.isEmpty {
            var index = ArchiveIndex()
            index.wanted = wanted + walks.compactMap(\.wanted)
            return index
        }
        return try RARVolumes.assemble(walks, names: volumes.map(\.name))
    }

    /// The volume's parts, and its number when the walk reached the end block.
    static func walk(_ volume: ArchiveVolume, input: Int) throws -> (RARVolumeWalk, number: Int?) {
        guard let (version, start) = try RARSignature.find(in: volume) else {
            var walk = RARVolumeWalk(input: input, number: 0, isVolume: false)
            walk.wanted = RARSignature.wanted(in: volume, input: input)
            return (walk, nil)
        }
        guard version == .rar4 else { throw MediaError(EINVAL, "\(volume.name): a RAR5 archive, not RAR4") }
        var walk = RARVolumeWalk(input: input, number: 0, isVolume: false)
        var offset = start
        var sawMain = false
        while offset < volume.length {
            let origin = "\(volume.name) at \(offset)"
            guard offset + 7 <= volume.length else { throw MediaError(EINVAL, "\(origin): a block header cut short by the volume's end") }
            guard let lead = volume.bytes(offset..<(offset + 7)) else {
                walk.wanted = ArchiveExtent(volume: input, range: offset..<min(volume.length, offset + readAhead))
                return (walk, nil)
            }
            var cursor = ByteCursor(lead, origin: origin)
            let crc = try cursor.u16("header CRC")
            let type = try cursor.u8("block type")
            let flags = try cursor.u16("block flags")
            let size = Int64(try cursor.u16("header size"))
            guard size >= 7, offset + size <= volume.length else {
                throw MediaError(EINVAL, "\(origin): header size \(size) out of bounds")
            }
            guard let block = volume.bytes(offset..<(offset + size)) else {
                walk.wanted = ArchiveExtent(volume: input, range: offset..<min(volume.length, offset + max(size, readAhead)))
                return (walk, nil)
            }
            guard UInt16(truncatingIfNeeded: CRC32.checksum(block.dropFirst(2))) == crc else {
                throw MediaError(EINVAL, "\(origin): header CRC mismatch")
            }
            let blockOrigin = "\(origin), block type 0x\(String(type, radix: 16))"
            if !sawMain && type != 0x73 { throw MediaError(EINVAL, "\(blockOrigin): before the main header") }
            var body = ByteCursor(block.dropFirst(7), origin: blockOrigin)
            var dataSize: Int64 = 0
            switch type {
            case 0x73:
                if flags & 0x80 != 0 { throw ArchiveRefusal.encryptedHeaders }
                walk.isVolume = flags & 0x01 != 0
                sawMain = true
            case 0x74:
                var part = try file(&body, flags: flags)
                dataSize = part.data.upperBound
                let dataStart = offset + size
                guard dataSize <= volume.length - dataStart else {
                    throw body.failure("\(dataSize) bytes of data run past the volume's end")
                }
                part.data = dataStart..<(dataStart + dataSize)
                walk.parts.append(part)
                if part.splitAfter { return (walk, nil) }
            case 0x7B:
                if flags & 0x02 != 0 { _ = try body.u32("archive data CRC") }
                return (walk, flags & 0x08 != 0 ? Int(try body.u16("volume number")) : nil)
            default:
                // Comments, recovery records, service blocks: only their sizes
                // matter. A service block's size is laid out as a file's.
                if flags & 0x8000 != 0 { dataSize = Int64(try body.u32("data size")) }
                if type == 0x7A, flags & 0x100 != 0 {
                    try body.skip(21, "service header fields")
                    let high = Int64(try body.u32("high data size"))
                    guard high < 1 << 30 else { throw body.failure("data size out of bounds") }
                    dataSize |= high << 32
                }
            }
            offset += size
            guard dataSize <= volume.length - offset else { throw MediaError(EINVAL, "\(blockOrigin): data runs past the volume's end") }
            offset += dataSize
        }
        return (walk, nil)
    }

    /// The volume number in an end block the volume's last bytes hold.
    static func endBlockNumber(_ volume: ArchiveVolume) throws -> Int? {
        for size in Int64(7)...min(tailBytes, volume.length) {
            let start = volume.length - size
            guard let block = volume.bytes(start..<volume.length) else { return nil }
            var cursor = ByteCursor(block, origin: "\(volume.name) at \(start), end block")
            let crc = try cursor.u16("header CRC")
            guard try cursor.u8("block type") == 0x7B else { continue }
            let flags = try cursor.u16("block flags")
            guard Int64(try cursor.u16("header size")) == size,
                  UInt16(truncatingIfNeeded: CRC32.checksum(block.dropFirst(2))) == crc else { continue }
            if flags & 0x02 != 0 { _ = try cursor.u32("archive data CRC") }
            return flags & 0x08 != 0 ? Int(try cursor.u16("volume number")) : nil
        }
        return nil
    }

    /// A FILE_HEAD's fields; the part's data range holds 0..<packed size
    /// until the caller places it.
    static func file(_ cursor: inout ByteCursor, flags: UInt16) throws -> RARPart {
        let packLow = try cursor.u32("packed size")
        let unpackedLow = try cursor.u32("unpacked size")
        let host = try cursor.u8("host OS")
        _ = try cursor.u32("file CRC")
        let dosTime = try cursor.u32("file time")
        _ = try cursor.u8("version")
        let method = try cursor.u8("method")
        let nameSize = Int(try cursor.u16("name size"))
        let attributes = try cursor.u32("attributes")
        var wide = (packed: UInt64(packLow), size: UInt64(unpackedLow))
        if flags & 0x100 != 0 {
            wide.packed |= UInt64(try cursor.u32("high packed size")) << 32
            wide.size |= UInt64(try cursor.u32("high unpacked size")) << 32
        }
        guard wide.packed <= UInt64(Limits.maxLength), wide.size <= UInt64(Limits.maxLength) else {
            throw cursor.failure("sizes \(wide.packed)/\(wide.size) out of bounds")
        }
        let packed = Int64(wide.packed), size = Int64(wide.size)
        let nameBytes = try cursor.bytes(nameSize, "name")
        let name = flags & 0x200 != 0 ? RAR4Name.decode(nameBytes) : RAR4Name.plain(nameBytes)
        var mtime = DOSTime.seconds(dosTime)
        if flags & 0x400 != 0 { try cursor.skip(8, "salt") }
        // EXT_TIME: the mtime's 4 high bits; 0x4 adds the odd second DOS time drops.
        if flags & 0x1000 != 0, cursor.remaining >= 2, let seconds = mtime, try cursor.u16("extended time flags") & 0xC000 == 0xC000 {
            mtime = seconds + 1
        }
        var refusal: ArchiveRefusal?
        if flags & 0x04 != 0 { refusal = .encryptedData }
        if refusal == nil, host == 3, attributes & 0xF000 == 0xA000 { refusal = .link }
        if refusal == nil, flags & 0x100 == 0, unpackedLow == UInt32.max { refusal = .unknownSize }
        if refusal == nil, method != 0x30 { refusal = flags & 0x10 != 0 ? .solid : .compressed(method: Int(method) - 0x30) }
        var path = name
        do {
            path = try ArchivePath.checked(name, backslashIsSeparator: true)
        } catch let escaping as ArchiveRefusal {
            refusal = refusal ?? escaping
        }
        return RARPart(name: name, path: path, size: size, mtime: mtime, splitBefore: flags & 0x01 != 0,
                       splitAfter: flags & 0x02 != 0, isDirectory: flags & 0xE0 == 0xE0, data: 0..<packed, refusal: refusal)
    }
}
