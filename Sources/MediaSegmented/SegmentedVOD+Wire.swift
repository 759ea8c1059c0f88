// How a range of a VOD's part goes on the wire: the range of its resource
// to ask for and, for a cipher text, the decryptor its bytes pass through.
// The transfers' business, so it lives with them, not with the VOD's
// description in MediaSources.
import Foundation
import MediaSupport
import MediaStore
import MediaNetwork
import MediaSources

extension SegmentedVOD {
    /// Whether part `index` is encrypted under a key this VOD does not
    /// hold (read from saved documents while the key could not be
    /// fetched): its bytes cannot be served, only failed.
    func lacksKey(part index: Int) -> Bool {
        guard let encryption = parts[index].encryption else { return false }
        return keys[encryption.keyURL] == nil
    }

    /// The first of `pieces` whose part lacks its key, as the error its
    /// read fails with.
    func missingKey(among pieces: [Layout.Piece]) -> MediaError? {
        guard let piece = pieces.first(where: { lacksKey(part: $0.part) }),
              let keyURL = parts[piece.part].encryption?.keyURL else { return nil }
        // ENOKEY, not EIO: the loader fails such reads at once, with EIO,
        // until the VOD gets its key, rather than retrying a transfer that
        // cannot succeed.
        return MediaError(ENOKEY, "segment \(piece.part + 1): its key \(MediaError.redacted(keyURL)) could not be fetched")
    }

    /// How `range` of part `index`'s bytes is fetched: the range of its
    /// resource to ask for and, for a cipher text, the decryptor its bytes go
    /// through. A cipher range starts a block early where it can (that
    /// block is the next one's IV) and ends on a block boundary; the
    /// decryptor drops what lies outside `range`.
    func wire(part index: Int, _ range: Range<Int64>) -> (range: Range<Int64>, decryptor: PieceDecryptor?) {
        let part = parts[index]
        let start = part.range?.lowerBound ?? 0
        guard let encryption = part.encryption, let key = keys[encryption.keyURL] else {
            return ((start + range.lowerBound)..<(start + range.upperBound), nil)
        }
        let block = Int64(AES128CBC.blockSize)
        let firstBlock = range.lowerBound / block * block
        let end = (range.upperBound + block - 1) / block * block
        let from = max(firstBlock - block, 0)
        let decryptor = PieceDecryptor(key: key, iv: firstBlock == 0 ? encryption.iv : nil,
                                       skip: Int(range.lowerBound - firstBlock), count: Int64(range.count))
        return ((start + from)..<(start + end), decryptor)
    }

    /// The request for `range` of part `index` (within it).
    func request(part index: Int, _ range: Range<Int64>, priority: FetchRequest.Priority,
                 group: String) -> (FetchRequest, PieceDecryptor?) {
        let (wire, decryptor) = self.wire(part: index, range)
        return (FetchRequest(url: parts[index].url, range: wire, ifRange: parts[index].resource?.ifRange,
                             priority: priority, group: group), decryptor)
    }
}
