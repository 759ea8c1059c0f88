// Finds where a RAR archive begins in a volume's head: at 0, or after a
// self-extractor stub. Tells RAR5 from RAR4 so each index refuses the
// other's volumes by name.
import Glibc
import MediaSupport
import Foundation
import MediaStore
import MediaNetwork

enum RARSignature {
    static let rar5: [UInt8] = [0x52, 0x61, 0x72, 0x21, 0x1A, 0x07, 0x01, 0x00]
    static let rar4: [UInt8] = [0x52, 0x61, 0x72, 0x21, 0x1A, 0x07, 0x00]
    /// How far into a volume a stub may push the signature.
    static let maxStub = 1 << 20

    enum Version { case rar4, rar5 }

    /// The version and the offset just past the signature; nil when not
    /// in what was read but perhaps further on: `wanted` says where.
    static func find(in volume: ArchiveVolume) throws -> (version: Version, start: Int64)? {
        let span = min(volume.available(from: 0), Int64(maxStub))
        let head = volume.bytes(0..<span) ?? []
        let marker = rar4.prefix(6)
        var index = head.startIndex
        while let found = head[index...].firstIndex(of: 0x52), found + 7 <= head.endIndex {
            if head[found..<(found + 6)].elementsEqual(marker) {
                if head[found + 6] == 0x00 { return (.rar4, Int64(found + 7)) }
                if head[found + 6] == 0x01, found + 8 <= head.endIndex, head[found + 7] == 0 {
                    return (.rar5, Int64(found + 8))
                }
            }
            index = found + 1
        }
        guard span < min(volume.length, Int64(maxStub)) else {
            throw MediaError(EINVAL, "\(volume.name): no RAR signature in its first \(span) bytes")
        }
        return nil
    }

    /// What to read next when `find` gave nil: the rest of where a stub may end.
    static func wanted(in volume: ArchiveVolume, input: Int) -> ArchiveExtent {
        let start = max(0, volume.available(from: 0) - 8)
        return ArchiveExtent(volume: input, range: start..<min(volume.length, Int64(maxStub)))
    }
}
