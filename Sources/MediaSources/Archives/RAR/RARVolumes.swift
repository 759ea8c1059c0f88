// Chains the parts RAR4 and RAR5 volumes list into members: volumes in the
// order their headers number them, a part that continues from the
// previous volume joined to the one that part left open. Refuses members
// whose volumes are missing; throws for a set whose headers contradict
// each other (two volumes with one number, a continuation of another
// member, sizes that differ between parts).
import Foundation
import MediaSupport
import MediaStore
import MediaNetwork

enum RARVolumes {
    private struct Open {
        var part: RARPart
        var extents: [ArchiveExtent]
        var lastNumber: Int
        var refusal: ArchiveRefusal?
    }

    static func assemble(_ walks: [RARVolumeWalk], names: [String]) throws -> ArchiveIndex {
        var index = ArchiveIndex()
        guard walks.allSatisfy(\.numbered) else {
            index.wanted = walks.compactMap(\.wanted)
            return index
        }
        let ordered = walks.sorted { $0.number < $1.number }
        for (previous, next) in zip(ordered, ordered.dropFirst()) where previous.number == next.number {
            throw ArchiveRefusal.volumesDisagree("\(names[previous.input]) and \(names[next.input]) are both volume \(next.number)")
        }
        if ordered.count > 1, let single = ordered.first(where: { !$0.isVolume }) {
            throw ArchiveRefusal.volumesDisagree("\(names[single.input]) is not a volume of a set")
        }
        index.volumeOrder = ordered.map(\.input)
        index.wanted = ordered.compactMap(\.wanted)
        var seen = Set<String>()
        var open: Open?
        var previousComplete = true
        var previousNumber = -1

        func finish(_ member: Open) {
            // Directories are implied by their members' paths.
            if member.part.isDirectory { return }
            var reason = member.refusal
            // Parts of volumes up to 2^62 bytes each could overflow a plain sum.
            let total = member.extents.reduce(Int64(0)) { sum, extent in
                let (next, overflow) = sum.addingReportingOverflow(extent.count)
                return overflow ? Int64.max : next
            }
            if reason == nil, total != member.part.size {
                reason = .volumesDisagree("\(member.part.name)'s parts hold \(total) bytes of \(member.part.size)")
            }
            if reason == nil, !seen.insert(member.part.path).inserted { reason = .duplicatePath(member.part.path) }
            if let reason {
                index.refused.append(.init(name: member.part.name, reason: reason))
            } else {
                index.members.append(ArchiveMember(path: member.part.path, size: member.part.size, mtime: member.part.mtime,
                                                   extents: member.extents.filter { $0.count > 0 }))
            }
        }

        for walk in ordered {
            if var left = open, left.lastNumber + 1 != walk.number {
                left.refusal = left.refusal ?? .missingVolume(left.lastNumber + 1)
                finish(left)
                open = nil
            }
            for (position, part) in walk.parts.enumerated() {
                let extent = ArchiveExtent(volume: walk.input, range: part.data)
                if part.splitBefore {
                    if var left = open {
                        guard position == 0, left.part.name == part.name else {
                            throw ArchiveRefusal.volumesDisagree("\(left.part.name) goes on in volume \(walk.number), which goes on with \(part.name)")
                        }
                        guard left.part.size == part.size else {
                            throw ArchiveRefusal.volumesDisagree("\(part.name) is \(left.part.size) bytes in volume \(left.lastNumber), \(part.size) in \(walk.number)")
                        }
                        left.extents.append(extent)
                        left.lastNumber = walk.number
                        left.refusal = left.refusal ?? part.refusal
                        open = left
                    } else if position == 0 && previousNumber != walk.number - 1 {
                        // Its first parts are in a volume not given.
                        open = Open(part: part, extents: [extent], lastNumber: walk.number,
                                    refusal: .missingVolume(walk.number - 1))
                    } else if position == 0 && !previousComplete {
                        // The part it continues lies in headers not read yet.
                        continue
                    } else {
                        throw ArchiveRefusal.volumesDisagree("\(part.name) in volume \(walk.number) continues no member")
                    }
                } else {
                    if let left = open {
                        throw ArchiveRefusal.volumesDisagree("\(left.part.name) goes on in volume \(walk.number), which begins \(part.name)")
                    }
                    open = Open(part: part, extents: [extent], lastNumber: walk.number, refusal: part.refusal)
                }
                if part.splitAfter {
                    guard position == walk.parts.count - 1 else {
                        throw ArchiveRefusal.volumesDisagree("\(part.name) goes on past volume \(walk.number) yet is not its last")
                    }
                } else if let done = open {
                    finish(done)
                    open = nil
                }
            }
            previousComplete = walk.wanted == nil
            previousNumber = walk.number
        }
        if var left = open {
            left.refusal = left.refusal ?? .missingVolume(left.lastNumber + 1)
            finish(left)
        }
        return index
    }
}
