// The plain bytes of one piece of an AES-128 segment, from its cipher
// bytes as they arrive: the block before the piece's first (its IV, when
// the piece does not start the segment) comes first and is not output,
// then whole blocks are decrypted and the piece's plain range is cut out
// of them (`skip` bytes dropped at the front, `count` bytes kept). Used on
// the fetcher's thread only, by one transfer.
import MediaStore
import Foundation
import MediaSupport
import MediaNetwork
import MediaSources

final class PieceDecryptor {
    private let key: [UInt8]
    private var decryptor: AES128CBC?
    /// The IV's bytes still to read off the front of the stream.
    private var ivBytes: [UInt8] = []
    private var skip: Int
    private var left: Int64

    /// `iv` nil: the first 16 bytes received are the IV.
    init(key: [UInt8], iv: [UInt8]?, skip: Int, count: Int64) {
        self.key = key
        self.skip = skip
        left = count
        if let iv { decryptor = AES128CBC(key: key, iv: iv) }
    }

    /// The plain bytes of the piece that `cipher` completes; nil if
    /// libcrypto fails.
    func feed(_ cipher: UnsafeRawBufferPointer) -> [UInt8]? {
        var cipher = cipher[...]
        if decryptor == nil {
            let take = min(AES128CBC.blockSize - ivBytes.count, cipher.count)
            ivBytes += cipher.prefix(take)
            cipher = cipher.dropFirst(take)
            guard ivBytes.count == AES128CBC.blockSize else { return [] }
            guard let made = AES128CBC(key: key, iv: ivBytes) else { return nil }
            decryptor = made
        }
        guard var plain = decryptor?.update(UnsafeRawBufferPointer(rebasing: cipher)) else { return nil }
        let dropped = min(skip, plain.count)
        plain.removeFirst(dropped)
        skip -= dropped
        if Int64(plain.count) > left { plain.removeLast(plain.count - Int(left)) }
        left -= Int64(plain.count)
        return plain
    }
}
