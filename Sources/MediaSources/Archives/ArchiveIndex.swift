// What an index made of an archive's bytes so far: the members it can
// serve, those it refuses and why, and the ranges it wants read before it
// can say more. A caller loops: read what is wanted, add it to the
// volumes, index again, until nothing is wanted.
import Foundation
import MediaSupport
import MediaStore
import MediaNetwork

package struct ArchiveIndex: Equatable, Sendable {
    /// A member the index will not serve, under the name the archive gives.
    package struct Refused: Equatable, Sendable {
        package var name: String
        package var reason: ArchiveRefusal

        package init(name: String, reason: ArchiveRefusal) {
            self.name = name
            self.reason = reason
        }
    }

    package var members: [ArchiveMember] = []
    package var refused: [Refused] = []
    /// Ranges not yet given that headers still lie in; while not empty,
    /// `members` may lack some.
    package var wanted: [ArchiveExtent] = []
    /// The caller's volume indexes in the set's order (first volume first).
    package var volumeOrder: [Int] = []

    package init() {}

    package var isComplete: Bool { wanted.isEmpty }
}
