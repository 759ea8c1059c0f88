// One run of a member's bytes: a byte range of one volume. A member's
// extents, in order, are its bytes; the same shape names a range an index
// wants read before it can say more.
import Foundation
import MediaSupport
import MediaStore
import MediaNetwork

package struct ArchiveExtent: Equatable, Hashable, Sendable {
    /// The volume's index in the list the caller gave the index (not its
    /// number in the set: `ArchiveIndex.volumeOrder` maps one to the other).
    package var volume: Int
    /// Half-open, within the volume's length.
    package var range: Range<Int64>

    package init(volume: Int, range: Range<Int64>) {
        self.volume = volume
        self.range = range
    }

    package var count: Int64 { range.upperBound - range.lowerBound }
}
