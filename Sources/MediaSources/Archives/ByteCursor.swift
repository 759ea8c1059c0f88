// Reads little-endian numbers and RAR5 vints from one header's bytes,
// throwing a MediaError that names the header and field when the bytes run
// out or a number is out of bounds. Never reads past its slice.
import Glibc
import MediaSupport
import Foundation
import MediaStore
import MediaNetwork

struct ByteCursor {
    private let bytes: ArraySlice<UInt8>
    private(set) var position: Int
    /// Names the header in errors: "film.part2.rar at 1234, file header".
    let origin: String

    init(_ bytes: ArraySlice<UInt8>, origin: String) {
        self.bytes = bytes
        self.position = bytes.startIndex
        self.origin = origin
    }

    /// Bytes left in the slice.
    var remaining: Int { bytes.endIndex - position }
    /// Bytes read so far.
    var consumed: Int { position - bytes.startIndex }

    func failure(_ what: String) -> MediaError { MediaError(EINVAL, "\(origin): \(what)") }

    mutating func skip(_ count: Int, _ field: String) throws {
        guard count >= 0, count <= remaining else { throw failure("\(field) (\(count) bytes) runs past the header") }
        position += count
    }

    mutating func bytes(_ count: Int, _ field: String) throws -> ArraySlice<UInt8> {
        let start = position
        try skip(count, field)
        return bytes[start..<position]
    }

    mutating func u8(_ field: String) throws -> UInt8 { try bytes(1, field).first! }

    mutating func u16(_ field: String) throws -> UInt16 { UInt16(try little(2, field)) }

    mutating func u32(_ field: String) throws -> UInt32 { UInt32(try little(4, field)) }

    private mutating func little(_ count: Int, _ field: String) throws -> UInt64 {
        try bytes(count, field).reversed().reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// A RAR5 vint: 7 bits a byte, least significant first, high bit set
    /// while more follow; at most 10 bytes, and within 64 bits.
    mutating func vint(_ field: String) throws -> UInt64 {
        var value: UInt64 = 0
        for index in 0..<10 {
            let byte = try u8(field)
            let bits = UInt64(byte & 0x7F)
            guard index < 9 || bits <= 1 else { throw failure("\(field) overflows 64 bits") }
            value |= bits << (7 * UInt64(index))
            if byte & 0x80 == 0 { return value }
        }
        throw failure("\(field) is longer than 10 bytes")
    }

    /// A vint that is a length or offset within `Limits.maxLength`.
    mutating func length(_ field: String) throws -> Int64 {
        let value = try vint(field)
        guard value <= UInt64(Limits.maxLength) else { throw failure("\(field) \(value) out of bounds") }
        return Int64(value)
    }

    /// A vint that is a count of bytes within this header.
    mutating func count(_ field: String) throws -> Int {
        let value = try vint(field)
        guard value <= UInt64(remaining) else { throw failure("\(field) \(value) runs past the header") }
        return Int(value)
    }
}
