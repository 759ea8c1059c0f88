// A file made of other URLs' bytes: an HLS VOD's init segment and media
// segments, in order. Its URL (the media playlist's) is the file's URL and
// cache key; its parts are what SegmentedFetcher turns a range of it into.
// Immutable once made: the parts' lengths, when the playlist does not give
// them, are learned by SegmentSizer and settled here as a `Layout`.
// Lengths and offsets are of the file's bytes: an AES-128 part's plain
// bytes, fewer than its cipher text by its padding. Its keys are held here,
// in memory only: never in the validator, the cache or a log line.
import Foundation
import MediaStore
import MediaSupport
import MediaNetwork

package final class SegmentedVOD: Sendable {
    package typealias Part = HLSPlaylist.Part

    /// The file's URL: requests for it are served from the parts.
    package let url: String
    package let parts: [Part]
    /// `video/mp2t` or `video/mp4`.
    package let contentType: String
    /// What the validator is made of besides the lengths: the parts' URLs,
    /// ranges, key URLs and IVs (a playlist that changes them is another
    /// version); never a key.
    package let partsDigest: String
    /// AES-128 keys by key URL, 16 bytes each.
    package let keys: [String: [UInt8]]
    /// The file's date, when its source gives one (an archive member's).
    package let lastModified: String?
    /// An archive member's (ArchiveFolder), not a VOD's.
    package let isArchiveMember: Bool

    /// `version`: what else makes another version of the file besides its
    /// parts (an archive member: its volumes' validators).
    package init(url: String, parts: [Part], contentType: String, keys: [String: [UInt8]] = [:],
                version: String = "", lastModified: String? = nil, isArchiveMember: Bool = false) {
        self.url = url
        self.parts = parts
        self.contentType = contentType
        self.keys = keys
        self.lastModified = lastModified
        self.isArchiveMember = isArchiveMember
        partsDigest = SHA256.hex(parts.map { part in
            "\(part.url) \(part.range.map { "\($0.lowerBound)-\($0.upperBound)" } ?? "-")"
                + (part.encryption.map { " \($0.keyURL) \($0.iv.map { String($0, radix: 16) }.joined())" } ?? "")
        }.joined(separator: "\n") + (version.isEmpty ? "" : "\n" + version))
    }

    /// The parts' lengths when the playlist gave them all (byte ranges of
    /// clear parts: a cipher text's plain length needs its last blocks).
    package var listedLengths: [Int64]? {
        let lengths = parts.compactMap { $0.encryption == nil ? $0.range?.count : nil }
        return lengths.count == parts.count ? lengths.map(Int64.init) : nil
    }

    /// Where each part lies in the file, once every length is known.
    package struct Layout: Sendable, Equatable {
        /// `offsets[i]..<offsets[i+1]` is part i; the last is the length.
        package let offsets: [Int64]
        /// A strong validator of this version of the file: its parts and
        /// their lengths.
        package let etag: String

        package var length: Int64 { offsets.last ?? 0 }
    }

    /// The layout for `lengths` (one per part), or an error naming what was
    /// out of bounds: a negative length, or a sum past `Limits.maxLength`.
    package func layout(lengths: [Int64]) throws -> Layout {
        guard lengths.count == parts.count else { throw MediaError.io("\(displayURL): \(lengths.count) lengths for \(parts.count) parts") }
        var offsets: [Int64] = [0]
        offsets.reserveCapacity(parts.count + 1)
        for (index, length) in lengths.enumerated() {
            let (end, overflow) = offsets[index].addingReportingOverflow(length)
            guard length >= 0, !overflow, end <= Limits.maxLength else {
                throw MediaError.io("\(displayURL): segment \(index + 1)'s length \(length) takes the file past the limit")
            }
            offsets.append(end)
        }
        let digest = SHA256.hex(partsDigest + " " + lengths.map(String.init).joined(separator: ","))
        return Layout(offsets: offsets, etag: "\"vod-\(digest.prefix(32))\"")
    }

    /// The file's ContentInfo under `layout`.
    package func info(_ layout: Layout) -> ContentInfo {
        ContentInfo(length: layout.length, contentType: contentType, etag: layout.etag, lastModified: lastModified,
                    acceptsRanges: true)
    }

    package var displayURL: String { MediaError.redacted(url) }
}

extension SegmentedVOD.Layout {
    /// One part's share of a range of the file.
    package struct Piece: Equatable, Sendable {
        package var part: Int
        /// Within the part (0 is its first byte).
        package var range: Range<Int64>
    }

    /// The pieces of parts that `range` (clipped to the file) covers, in
    /// order; empty parts are skipped.
    package func pieces(of range: Range<Int64>) -> [Piece] {
        let range = range.clamped(to: 0..<length)
        guard !range.isEmpty else { return [] }
        // The last part starting at or before the range's first byte.
        var low = 0
        var high = offsets.count - 2
        while low < high {
            let middle = (low + high + 1) / 2
            if offsets[middle] <= range.lowerBound { low = middle } else { high = middle - 1 }
        }
        var pieces: [Piece] = []
        var part = low
        while part < offsets.count - 1, offsets[part] < range.upperBound {
            let start = max(offsets[part], range.lowerBound)
            let end = min(offsets[part + 1], range.upperBound)
            if start < end { pieces.append(Piece(part: part, range: (start - offsets[part])..<(end - offsets[part]))) }
            part += 1
        }
        return pieces
    }
}
