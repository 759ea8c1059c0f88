// A file inside an archive that can be served by range: its path, size,
// time and where its bytes lie in the volumes. Only stored, unencrypted
// members become one; what cannot is an `ArchiveIndex.Refused`.
import Foundation
import MediaSupport
import MediaStore
import MediaNetwork

package struct ArchiveMember: Equatable, Sendable {
    /// Components joined by "/", checked by `ArchivePath` (no "..", no
    /// empty component, not absolute).
    package var path: String
    package var size: Int64
    /// Unix seconds; nil when the archive does not say.
    package var mtime: Int64?
    /// In order; their counts sum to `size`.
    package var extents: [ArchiveExtent]

    package init(path: String, size: Int64, mtime: Int64?, extents: [ArchiveExtent]) {
        self.path = path
        self.size = size
        self.mtime = mtime
        self.extents = extents
    }
}
