// One file header of one RAR volume, RAR4 or RAR5 alike: a member's part
// (or all of it) and where its data lies in that volume. `RARVolumes`
// chains the parts of split members across volumes.
import Foundation
import MediaSupport
import MediaStore
import MediaNetwork

struct RARPart {
    /// As the archive spells it, for refusals and for matching a part to
    /// the one it continues.
    var name: String
    var path: String
    /// The whole member's size (every part gives it).
    var size: Int64
    var mtime: Int64?
    /// The data continues from the previous volume / in the next.
    var splitBefore: Bool
    var splitAfter: Bool
    var isDirectory: Bool
    /// Within this volume.
    var data: Range<Int64>
    /// Set when the member cannot be served by range, whatever its parts.
    var refusal: ArchiveRefusal?
}
