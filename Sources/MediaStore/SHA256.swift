// SHA-256 (FIPS 180-4) by OpenSSL's libcrypto, used only to name cache
// entries after their key: the hex digest is a directory name on disk, so
// it must stay exactly this function of the key's UTF-8 bytes.
import CCrypto
import MediaSupport

package enum SHA256 {
    package static func hex(_ string: String) -> String {
        hex(Array(string.utf8))
    }

    /// EVP_Digest with EVP_sha256: the 32-byte digest as 64 lowercase hex digits.
    package static func hex(_ bytes: [UInt8]) -> String {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let done = bytes.withUnsafeBytes { message in
            EVP_Digest(message.baseAddress, message.count, &digest, &length, EVP_sha256(), nil)
        }
        // Fails only when libcrypto cannot allocate a context: no name is
        // better than a wrong one.
        precondition(done == 1 && length == 32, "EVP_Digest(SHA-256) failed")
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(64)
        for byte in digest[..<32] {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0xf)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
