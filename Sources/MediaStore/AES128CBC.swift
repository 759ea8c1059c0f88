// AES-128 in CBC mode, decrypting, by OpenSSL's libcrypto (EVP), for HLS
// segments encrypted with METHOD=AES-128. Padding is left to the caller
// (EVP's is off): a segment is decrypted in pieces from the middle, where
// the PKCS#7 padding of its last block is not in sight, and the plain length
// is learned from that last block alone (`plainLength`). Never a
// hand-written cipher; the key lives in memory only, in the context.
import CCrypto
import MediaSupport

package final class AES128CBC {
    package static let blockSize = 16

    private let context: OpaquePointer

    /// A decryptor under `key` (16 bytes) starting from `iv` (16 bytes);
    /// nil when either has another length or libcrypto fails.
    package init?(key: [UInt8], iv: [UInt8]) {
        guard key.count == Self.blockSize, iv.count == Self.blockSize, let context = EVP_CIPHER_CTX_new() else { return nil }
        guard EVP_DecryptInit_ex(context, EVP_aes_128_cbc(), nil, key, iv) == 1,
              EVP_CIPHER_CTX_set_padding(context, 0) == 1 else {
            EVP_CIPHER_CTX_free(context)
            return nil
        }
        self.context = context
    }

    deinit {
        EVP_CIPHER_CTX_free(context)
    }

    /// EVP_DecryptUpdate: the plain bytes of every whole block given so far
    /// (a partial block is kept for the next call); nil if libcrypto fails.
    package func update(_ cipher: UnsafeRawBufferPointer) -> [UInt8]? {
        guard !cipher.isEmpty else { return [] }
        var out = [UInt8](repeating: 0, count: cipher.count + Self.blockSize)
        var written: Int32 = 0
        let done = out.withUnsafeMutableBufferPointer { out in
            EVP_DecryptUpdate(context, out.baseAddress, &written, cipher.baseAddress?.assumingMemoryBound(to: UInt8.self),
                              Int32(cipher.count))
        }
        guard done == 1, written >= 0 else { return nil }
        out.removeSubrange(Int(written)...)
        return out
    }

    /// The plain length of a cipher text of `cipherLength` bytes whose last
    /// block is `last` and whose block before it (or the IV, for one block)
    /// is `previous`: the length less its PKCS#7 padding. Nil when the length
    /// is not a whole number of blocks or the padding is not PKCS#7 (another
    /// key, or not AES-128-CBC at all).
    package static func plainLength(cipherLength: Int64, previous: [UInt8], last: [UInt8], key: [UInt8]) -> Int64? {
        guard cipherLength >= Int64(blockSize), cipherLength % Int64(blockSize) == 0,
              let decryptor = AES128CBC(key: key, iv: previous),
              let plain = last.withUnsafeBytes({ decryptor.update($0) }), plain.count == blockSize else { return nil }
        let pad = Int(plain[blockSize - 1])
        guard (1...blockSize).contains(pad), plain[(blockSize - pad)...].allSatisfy({ Int($0) == pad }) else { return nil }
        return cipherLength - Int64(pad)
    }
}
