// An archive's index as kept in the cache beside the listing that holds
// its volumes (a SavedDocument under `archive-index:` and the first
// volume's URL), so a remount shows its folder and members with no
// request, its server up or gone. One line a volume (`v`, URL, length,
// ETag, Last-Modified) in the index's order, one a member (`m`, path,
// size, mtime, extents as `volume:start-end`); fields tab-separated and
// percent-escaped. Read back bounded: an index of other volumes, a
// number out of bounds or an extent outside its volume is no index.
import Foundation
import MediaStore
import MediaSupport
import MediaNetwork

package enum SavedArchiveIndex {
    static let maxMembers = 100_000

    package static func key(forFirstVolume url: String) -> String { "archive-index:" + url }

    package static func encode(_ read: ArchiveReader.Result, urls: [String]) -> String {
        var lines: [String] = []
        for (url, volume) in zip(urls, read.volumes) {
            lines.append(["v", escape(url), String(volume.length), escape(volume.etag ?? ""), escape(volume.lastModified ?? "")]
                .joined(separator: "\t"))
        }
        for member in read.index.members {
            let extents = member.extents.map { "\($0.volume):\($0.range.lowerBound)-\($0.range.upperBound)" }.joined(separator: ",")
            lines.append(["m", escape(member.path), String(member.size), member.mtime.map(String.init) ?? "", extents]
                .joined(separator: "\t"))
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The index saved for volumes at exactly `urls`, in that order; nil
    /// when the text is not one.
    package static func decode(_ text: String, urls: [String]) -> ArchiveReader.Result? {
        var volumes: [(length: Int64, etag: String?, lastModified: String?)] = []
        var index = ArchiveIndex()
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            switch fields.first {
            case "v"?:
                guard fields.count == 5, volumes.count < urls.count, unescape(fields[1]) == urls[volumes.count],
                      let length = Limits.length(fields[2]) else { return nil }
                let etag = unescape(fields[3]) ?? "", modified = unescape(fields[4]) ?? ""
                volumes.append((length, etag.isEmpty ? nil : etag, modified.isEmpty ? nil : modified))
            case "m"?:
                guard fields.count == 5, volumes.count == urls.count, index.members.count < maxMembers,
                      let path = unescape(fields[1]), !path.isEmpty, let size = Limits.length(fields[2]) else { return nil }
                let mtime = fields[3].isEmpty ? nil : Int64(fields[3])
                guard fields[3].isEmpty || mtime != nil else { return nil }
                var extents: [ArchiveExtent] = []
                var total: Int64 = 0
                for field in fields[4].split(separator: ",") {
                    let parts = field.split(separator: ":", maxSplits: 1)
                    let bounds = parts.count == 2 ? parts[1].split(separator: "-", maxSplits: 1) : []
                    guard parts.count == 2, let volume = Int(parts[0]), volumes.indices.contains(volume), bounds.count == 2,
                          let start = Limits.length(bounds[0]), let end = Limits.length(bounds[1]),
                          start <= end, end <= volumes[volume].length else { return nil }
                    let (sum, overflow) = total.addingReportingOverflow(end - start)
                    guard !overflow else { return nil }
                    total = sum
                    extents.append(ArchiveExtent(volume: volume, range: start..<end))
                }
                guard total == size else { return nil }
                index.members.append(ArchiveMember(path: path, size: size, mtime: mtime, extents: extents))
            default:
                return nil
            }
        }
        guard volumes.count == urls.count else { return nil }
        return ArchiveReader.Result(index: index, volumes: volumes, rounds: 0)
    }

    private static func escape(_ field: String) -> String {
        var out = ""
        for scalar in field.unicodeScalars {
            switch scalar {
            case "%", "\t", "\n", "\r": out += String(format: "%%%02X", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    private static func unescape(_ field: String) -> String? {
        field.removingPercentEncoding ?? (field.contains("%") ? nil : field)
    }
}
