// Lists a ZIP file's stored members as ranges of it, in the rounds a
// caller reads: the tail (end record, ZIP64 locator and record), then the
// central directory, then each member's local header, whose extra field
// can differ from the central one and so decides where the data starts.
// Prepended data (a self-extractor stub) shifts every offset by the same
// base. Every number bounded; hostile bytes throw naming the field. Pure:
// no network.
import Glibc
import MediaSupport
import Foundation
import MediaStore
import MediaNetwork

package enum ZipIndex {
    /// The end record (22 bytes), its longest comment, and a ZIP64 locator
    /// (20) before it: a caller reading this much of the end reads it all.
    package static let tailBytes: Int64 = 22 + 65_535 + 20
    /// More entries than this is not an archive mediafs shows as a folder.
    package static let maxEntries = 1_000_000
    static let maxDirectory: Int64 = 256 << 20
    /// Local headers are asked for with this much room for an extra field
    /// longer than the central one.
    static let localSlack: Int64 = 256

    package static func index(_ volume: ArchiveVolume) throws -> ArchiveIndex {
        var index = ArchiveIndex()
        index.volumeOrder = [0]
        let directory: ZipDirectory
        switch try ZipDirectory.locate(in: volume) {
        case .found(let found): directory = found
        case .wants(let range):
            index.wanted = [ArchiveExtent(volume: 0, range: range)]
            return index
        }
        guard let bytes = volume.bytes(directory.range) else {
            index.wanted = [ArchiveExtent(volume: 0, range: directory.range)]
            return index
        }
        var cursor = ByteCursor(bytes, origin: "\(volume.name), central directory at \(directory.range.lowerBound)")
        var wanted = [Range<Int64>]()
        var seen = Set<String>()
        for number in 0..<directory.entries {
            let entry = try ZipEntry.central(&cursor, number: number, base: directory.base,
                                             directoryStart: directory.range.lowerBound)
            if entry.isDirectory { continue }
            if let refusal = entry.refusal {
                index.refused.append(.init(name: entry.name, reason: refusal))
                continue
            }
            let directoryStart = directory.range.lowerBound
            let localEnd = entry.localStart + 30 + Int64(entry.nameLength)
            guard localEnd <= directoryStart else {
                throw MediaError(EINVAL, "\(volume.name): \(entry.name)'s local header at \(entry.localStart) runs into the central directory")
            }
            guard let lead = volume.bytes(entry.localStart..<localEnd) else {
                wanted.append(entry.localStart..<min(localEnd + Int64(entry.centralExtraLength) + localSlack, directoryStart))
                continue
            }
            let extraLength = try ZipEntry.localExtraLength(lead, entry: entry, origin: "\(volume.name) at \(entry.localStart)")
            let dataStart = localEnd + extraLength
            guard dataStart <= directoryStart, entry.size <= directoryStart - dataStart else {
                throw MediaError(EINVAL, "\(volume.name): \(entry.name)'s \(entry.size) bytes at \(dataStart) run into the central directory")
            }
            // The local extra need not be read: its length says where the data starts.
            guard seen.insert(entry.path).inserted else {
                index.refused.append(.init(name: entry.name, reason: .duplicatePath(entry.path)))
                continue
            }
            let extents = entry.size > 0 ? [ArchiveExtent(volume: 0, range: dataStart..<(dataStart + entry.size))] : []
            index.members.append(ArchiveMember(path: entry.path, size: entry.size, mtime: entry.mtime, extents: extents))
        }
        index.wanted = merged(wanted).map { ArchiveExtent(volume: 0, range: $0) }
        return index
    }

    /// Ranges that overlap or touch, as one.
    static func merged(_ ranges: [Range<Int64>]) -> [Range<Int64>] {
        ranges.sorted { $0.lowerBound < $1.lowerBound }.reduce(into: []) { result, range in
            if let last = result.last, range.lowerBound <= last.upperBound {
                result[result.count - 1] = last.lowerBound..<max(last.upperBound, range.upperBound)
            } else {
                result.append(range)
            }
        }
    }
}
