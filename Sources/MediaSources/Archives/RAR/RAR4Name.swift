// A RAR4 file name as text: UTF-8 when the bytes are, Latin-1 otherwise,
// or (flag 0x200) the ASCII name, a NUL, then RAR's compressed UTF-16
// (unrar's EncodeFileName / DecodeFileName). Never reads past the bytes.
import Foundation
import MediaSupport
import MediaStore
import MediaNetwork

enum RAR4Name {
    static func plain(_ bytes: ArraySlice<UInt8>) -> String {
        String(validating: bytes, as: UTF8.self) ?? String(bytes.map { Character(Unicode.Scalar($0)) })
    }

    static func decode(_ bytes: ArraySlice<UInt8>) -> String {
        guard let zero = bytes.firstIndex(of: 0) else { return plain(bytes) }
        let ascii = Array(bytes[..<zero])
        var encoded = bytes[(zero + 1)...].makeIterator()
        guard let high = encoded.next() else { return plain(bytes[..<zero]) }
        var units = [UInt16]()
        var flags: UInt8 = 0, flagBits = 0
        func put(_ low: UInt8, _ high: UInt8) { units.append(UInt16(high) << 8 | UInt16(low)) }
        decoding: while units.count < 0xFFFF {
            if flagBits == 0 {
                guard let next = encoded.next() else { break }
                flags = next
                flagBits = 8
            }
            flagBits -= 2
            switch (flags >> UInt8(flagBits)) & 0x03 {
            case 0:
                guard let low = encoded.next() else { break decoding }
                put(low, 0)
            case 1:
                guard let low = encoded.next() else { break decoding }
                put(low, high)
            case 2:
                guard let low = encoded.next(), let upper = encoded.next() else { break decoding }
                put(low, upper)
            default:
                guard let length = encoded.next() else { break decoding }
                if length & 0x80 != 0 {
                    guard let correction = encoded.next() else { break decoding }
                    for _ in 0..<(Int(length & 0x7F) + 2) {
                        guard units.count < ascii.count else { break decoding }
                        put(ascii[units.count] &+ correction, high)
                    }
                } else {
                    for _ in 0..<(Int(length) + 2) {
                        guard units.count < ascii.count else { break decoding }
                        put(ascii[units.count], 0)
                    }
                }
            }
        }
        return String(decoding: units, as: UTF16.self)
    }
}
