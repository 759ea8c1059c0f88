// Lists a RAR5 volume set's stored members as ranges of its volumes, from
// each volume's head (and further ranges it asks for). Every header's
// CRC32 is checked, every size bounded; the volumes' order is the one
// their main headers number, whatever their names. Pure: no network.
import Glibc
import MediaSupport
import Foundation
import MediaStore
import MediaNetwork

package enum RAR5Index {
    /// libarchive's bound: no real header is larger.
    static let maxHeader = 2 << 20
    /// What to want past a head: a header and likely the next ones.
    static let readAhead: Int64 = 64 << 10

    /// Indexes `volumes` given in any order. Throws `ArchiveRefusal` for a
    /// set that cannot be listed (encrypted headers, contradicting volumes)
    /// and MediaError, naming the volume, offset and field, for malformed bytes.
    package static func index(_ volumes: [ArchiveVolume]) throws -> ArchiveIndex {
        let walks = try volumes.enumerated().map { try walk($1, input: $0) }
        return try RARVolumes.assemble(walks, names: volumes.map(\.name))
    }

    static func walk(_ volume: ArchiveVolume, input: Int) throws -> RARVolumeWalk {
        guard let (version, start) = try RARSignature.find(in: volume) else {
            var walk = RARVolumeWalk(input: input, number: 0, isVolume: false)
            walk.wanted = RARSignature.wanted(in: volume, input: input)
            return walk
        }
        guard version == .rar5 else { throw MediaError(EINVAL, "\(volume.name): a RAR4 archive, not RAR5") }
        var walk = RARVolumeWalk(input: input, number: 0, isVolume: false)
        var offset = start
        var sawMain = false
        while offset < volume.length {
            let origin = "\(volume.name) at \(offset)"
            let prefixEnd = min(offset + 4 + 3, volume.length)
            guard let prefix = volume.bytes(offset..<prefixEnd) else {
                walk.wanted = want(volume, input: input, from: offset, count: readAhead)
                return walk
            }
            var lead = ByteCursor(prefix, origin: origin)
            let crc = try lead.u32("header CRC")
            let headerSize = try lead.vint("header size")
            guard headerSize > 0, headerSize <= UInt64(maxHeader) else {
                throw MediaError(EINVAL, "\(origin): header size \(headerSize) out of bounds")
            }
            let headerEnd = offset + Int64(lead.consumed) + Int64(headerSize)
            guard headerEnd <= volume.length else { throw MediaError(EINVAL, "\(origin): header runs past the volume's end") }
            guard let block = volume.bytes(offset..<headerEnd) else {
                walk.wanted = want(volume, input: input, from: offset, count: max(readAhead, headerEnd - offset))
                return walk
            }
            guard CRC32.checksum(block.dropFirst(4)) == crc else { throw MediaError(EINVAL, "\(origin): header CRC mismatch") }
            var header = ByteCursor(block.dropFirst(lead.consumed), origin: origin)
            let type = try header.vint("header type")
            let flags = try header.vint("header flags")
            let extraSize = flags & 0x01 != 0 ? try header.count("extra area size") : 0
            let dataSize = flags & 0x02 != 0 ? try header.length("data size") : 0
            let (dataEnd, overflow) = headerEnd.addingReportingOverflow(dataSize)
            guard !overflow, dataEnd <= volume.length else {
                throw MediaError(EINVAL, "\(origin): \(dataSize) bytes of data run past the volume's end")
            }
            let fields = try header.bytes(header.remaining - extraSize, "header fields")
            let extra = try header.bytes(extraSize, "extra area")
            let headerOrigin = "\(origin), header type \(type)"
            if !sawMain && type != 1 && type != 4 { throw MediaError(EINVAL, "\(headerOrigin): before the main header") }
            switch type {
            case 1:
                var main = ByteCursor(fields, origin: "\(origin), main header")
                let archiveFlags = try main.vint("archive flags")
                walk.isVolume = archiveFlags & 0x01 != 0
                if archiveFlags & 0x02 != 0 {
                    let number = try main.vint("volume number")
                    guard number < 1 << 20 else { throw main.failure("volume number \(number) out of bounds") }
                    walk.number = Int(number)
                }
                walk.numbered = true
                sawMain = true
            case 2:
                var part = try file(fields, extra: extra, origin: "\(origin), file header")
                part.splitBefore = flags & 0x08 != 0
                part.splitAfter = flags & 0x10 != 0
                part.data = headerEnd..<dataEnd
                walk.parts.append(part)
                // Nothing but service headers and the end follow a member
                // that goes on in the next volume.
                if part.splitAfter { return walk }
            case 4:
                throw ArchiveRefusal.encryptedHeaders
            case 5:
                return walk
            default:
                break // Service headers (comment, quick open, recovery record) and unknown ones: their sizes suffice.
            }
            offset = dataEnd
        }
        guard sawMain else { throw MediaError(EINVAL, "\(volume.name): no main header") }
        return walk
    }

    private static func want(_ volume: ArchiveVolume, input: Int, from offset: Int64, count: Int64) -> ArchiveExtent {
        ArchiveExtent(volume: input, range: offset..<min(volume.length, offset + count))
    }

    /// A file header's fields and extra records; data range and split flags
    /// are the caller's.
    static func file(_ fields: ArraySlice<UInt8>, extra: ArraySlice<UInt8>, origin: String) throws -> RARPart {
        var cursor = ByteCursor(fields, origin: origin)
        let fileFlags = try cursor.vint("file flags")
        let size = try cursor.length("unpacked size")
        _ = try cursor.vint("attributes")
        var mtime = fileFlags & 0x02 != 0 ? Int64(try cursor.u32("mtime")) : nil
        if fileFlags & 0x04 != 0 { _ = try cursor.u32("data CRC") }
        let compression = try cursor.vint("compression information")
        _ = try cursor.vint("host OS")
        let nameBytes = try cursor.bytes(try cursor.count("name length"), "name")
        let name = String(decoding: nameBytes, as: UTF8.self)
        var refusal: ArchiveRefusal?
        var records = ByteCursor(extra, origin: "\(origin), extra area")
        while records.remaining > 0 {
            var record = ByteCursor(try records.bytes(try records.count("extra record size"), "extra record"),
                                    origin: "\(origin), extra record")
            switch try record.vint("extra record type") {
            case 1: refusal = .encryptedData
            case 3: mtime = try time(&record) ?? mtime
            case 5: refusal = refusal ?? .link
            default: break
            }
        }
        let method = Int((compression >> 7) & 0x07)
        if refusal == nil, fileFlags & 0x08 != 0 { refusal = .unknownSize }
        if refusal == nil, method != 0 { refusal = compression & 0x40 != 0 ? .solid : .compressed(method: method) }
        var path = name
        do {
            guard String(validating: nameBytes, as: UTF8.self) != nil else { throw ArchiveRefusal.unsafePath(name) }
            path = try ArchivePath.checked(name, backslashIsSeparator: false)
        } catch let escaping as ArchiveRefusal {
            refusal = refusal ?? escaping
        }
        return RARPart(name: name, path: path, size: size, mtime: mtime, splitBefore: false, splitAfter: false,
                       isDirectory: fileFlags & 0x01 != 0, data: 0..<0, refusal: refusal)
    }

    /// The modification time of a time record, in Unix seconds.
    private static func time(_ record: inout ByteCursor) throws -> Int64? {
        let flags = try record.vint("time flags")
        guard flags & 0x02 != 0 else { return nil }
        if flags & 0x01 != 0 { return Int64(try record.u32("mtime")) }
        let low = UInt64(try record.u32("mtime")), high = UInt64(try record.u32("mtime"))
        let seconds = Int64((high << 32 | low) / 10_000_000) - 11_644_473_600
        return Limits.unixSeconds.contains(seconds) ? seconds : nil
    }
}
