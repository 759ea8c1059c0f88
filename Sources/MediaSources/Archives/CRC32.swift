// CRC-32 (IEEE 802.3, reflected 0xEDB88320), the checksum RAR5 headers
// carry; RAR4 headers carry its low 16 bits. Checks headers only: not
// cryptographic, and member data is never checked here.
import Foundation
import MediaSupport
import MediaStore
import MediaNetwork

enum CRC32 {
    private static let table: [UInt32] = (0..<256).map { index in
        var value = UInt32(index)
        for _ in 0..<8 { value = value & 1 == 1 ? 0xEDB8_8320 ^ (value >> 1) : value >> 1 }
        return value
    }

    static func checksum<Bytes: Collection>(_ bytes: Bytes) -> UInt32 where Bytes.Element == UInt8 {
        ~bytes.reduce(UInt32.max) { crc, byte in table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
    }
}
