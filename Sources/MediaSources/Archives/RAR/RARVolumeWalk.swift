// What one volume's headers say: its number in the set, its parts in
// order, and whether the walk saw all the headers it needs or stopped
// where the bytes read so far ran out.
import Foundation
import MediaSupport
import MediaStore
import MediaNetwork

struct RARVolumeWalk {
    /// The caller's index for this volume.
    var input: Int
    /// 0 for the first volume; meaningful once `numbered`.
    var number: Int
    /// Whether the headers that number the volume were read (RAR5's main
    /// header, RAR4's end block); until then the set cannot be ordered.
    var numbered = false
    /// The main header's volume flag: part of a multi-volume set.
    var isVolume: Bool
    var parts: [RARPart] = []
    /// A range the walk needs before it can go on; nil once complete.
    var wanted: ArchiveExtent?
}
