// The bytes of one volume a caller has read so far (its head, its tail,
// ranges an index asked for) and its total length. Indexes read headers
// only through it, so a header past what was read is a range to want,
// never an out-of-bounds read.
import Glibc
import MediaSupport
import Foundation
import MediaStore
import MediaNetwork

package struct ArchiveVolume: Sendable {
    package let length: Int64
    /// Names the volume in errors only; its order comes from its headers.
    package let name: String
    private var chunks: [(offset: Int64, bytes: [UInt8])] = []

    package init(name: String, length: Int64, head: [UInt8]) throws {
        guard Limits.isLength(length) else { throw MediaError(EINVAL, "\(name): length \(length) out of bounds") }
        self.length = length
        self.name = name
        try add(head, at: 0)
    }

    /// Adds bytes read at `offset`; they must lie within the length.
    package mutating func add(_ bytes: [UInt8], at offset: Int64) throws {
        guard offset >= 0, offset <= length, Int64(bytes.count) <= length - offset else {
            throw MediaError(EINVAL, "\(name): \(bytes.count) bytes at \(offset) lie past its length \(length)")
        }
        guard !bytes.isEmpty else { return }
        // Reads that overlap or touch become one, so a header across two
        // reads is still whole in one.
        var merged = (offset: offset, bytes: bytes)
        var kept = [(offset: Int64, bytes: [UInt8])]()
        for chunk in chunks {
            let end = chunk.offset + Int64(chunk.bytes.count), mergedEnd = merged.offset + Int64(merged.bytes.count)
            guard chunk.offset <= mergedEnd, merged.offset <= end else {
                kept.append(chunk)
                continue
            }
            let start = min(chunk.offset, merged.offset)
            var joined = [UInt8](repeating: 0, count: Int(max(end, mergedEnd) - start))
            joined.replaceSubrange(Int(chunk.offset - start)..<Int(end - start), with: chunk.bytes)
            joined.replaceSubrange(Int(merged.offset - start)..<Int(mergedEnd - start), with: merged.bytes)
            merged = (start, joined)
        }
        chunks = kept + [merged]
    }

    /// The bytes of `range`, if one read holds them all; nil otherwise.
    func bytes(_ range: Range<Int64>) -> ArraySlice<UInt8>? {
        guard range.lowerBound >= 0, range.upperBound <= length else { return nil }
        for chunk in chunks where chunk.offset <= range.lowerBound
            && range.upperBound - chunk.offset <= Int64(chunk.bytes.count) {
            let start = Int(range.lowerBound - chunk.offset)
            return chunk.bytes[start..<(start + Int(range.count))]
        }
        return nil
    }

    /// How many bytes from `offset` one read holds (0 when none does).
    func available(from offset: Int64) -> Int64 {
        var best: Int64 = 0
        for chunk in chunks where chunk.offset <= offset && offset < chunk.offset + Int64(chunk.bytes.count) {
            best = max(best, chunk.offset + Int64(chunk.bytes.count) - offset)
        }
        return best
    }

    /// How many of the volume's last bytes one read holds.
    var readAtEnd: Int64 {
        chunks.filter { $0.offset + Int64($0.bytes.count) == length }.map { Int64($0.bytes.count) }.max() ?? 0
    }
}
