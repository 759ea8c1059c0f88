// `GET /status.json` on the admin listener, what the status page draws:
// the totals, the sources' health and the readers, each from the producer
// of the root's xattr that `mediafs status --json` reads (`stats`,
// `sources`, `readers`), so the page and the command show the same
// figures; and the files in use, each with its cached ranges and the
// ranges its transfers are fetching.
import Foundation
import MediaSupport

public enum StatusDocument {
    /// Files listed at most (in name order): a page, not an inventory.
    static let filesListed = 64
    /// Ranges per file at most: more than a bar of a thousand pixels shows.
    static let rangesPerFile = 256
    /// A file's name is cut to this many bytes, as a reader's is.
    static let nameLimit = Catalog.readerFileLimit

    public static func json(for catalog: Catalog) -> String {
        let inUse = catalog.allLoaders.map { (name: $0.source.name, status: $0.status()) }
            .filter { $0.status.openHandles > 0 || $0.status.state == .fetching }
            .sorted { $0.name < $1.name }
        let files = inUse.prefix(filesListed).map { file -> FileRow in
            let size = file.status.info?.length
            let (cached, cachedCut) = drawn(file.status.present, size: size)
            let (inFlight, inFlightCut) = drawn(file.status.inFlight, size: size)
            return FileRow(name: ReaderProcess.cut(file.name, to: nameLimit), size: size,
                           cachedBytes: file.status.cachedBytes, complete: file.status.isComplete,
                           state: file.status.stateText, pinned: file.status.pinned,
                           openHandles: file.status.openHandles, cachedRanges: cached, inFlight: inFlight,
                           rangesCut: cachedCut || inFlightCut)
        }
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let filesText = (try? encoder.encode(Array(files))).map { String(decoding: $0, as: UTF8.self) } ?? "[]"
        // Each part is a JSON value already, made by a real encoder.
        return "{\"files\":\(filesText),\"files_in_use\":\(inUse.count),\"readers\":\(catalog.readersJSON()),"
            + "\"sources\":\(catalog.sourcesJSON()),\"totals\":\(catalog.statsJSON())}"
    }

    /// `set` as [start, end) pairs, at most `rangesPerFile`: gaps thinner
    /// than a thousandth of the file are closed first (no bar shows them),
    /// then the rest cut (true).
    static func drawn(_ set: ByteRangeSet, size: Int64?) -> (ranges: [[Int64]], cut: Bool) {
        var ranges = set.ranges
        if ranges.count > rangesPerFile, let size, size > 0 {
            let gap = max(1, size / 1000)
            var merged: [Range<Int64>] = []
            for range in ranges {
                if let last = merged.last, range.lowerBound - last.upperBound <= gap {
                    merged[merged.count - 1] = last.lowerBound..<range.upperBound
                } else {
                    merged.append(range)
                }
            }
            ranges = merged
        }
        let cut = ranges.count > rangesPerFile
        return (ranges.prefix(rangesPerFile).map { [$0.lowerBound, $0.upperBound] }, cut)
    }

    /// One file in use, its keys in snake case.
    private struct FileRow: Encodable {
        var name: String
        var size: Int64?
        var cachedBytes: Int64
        var complete: Bool
        var state: String
        var pinned: Bool
        var openHandles: Int
        var cachedRanges, inFlight: [[Int64]]
        var rangesCut: Bool
    }
}
