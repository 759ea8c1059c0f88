// Which bytes of an entry are held on disk: sorted, disjoint, coalesced
// half-open ranges. Pure value logic; it must not know about files, locks or
// the network, so the loader and the store can both trust it and test it alone.

public struct ByteRangeSet: Equatable, Sendable, CustomStringConvertible {
    /// Sorted by lowerBound; no two ranges overlap or touch; none is empty.
    package private(set) var ranges: [Range<Int64>]

    package init() {
        ranges = []
    }

    package init(_ ranges: [Range<Int64>]) {
        self.ranges = []
        for r in ranges { insert(r) }
    }

    package var isEmpty: Bool { ranges.isEmpty }

    package var byteCount: Int64 {
        ranges.reduce(0) { $0 + ($1.upperBound - $1.lowerBound) }
    }

    /// Index of the first range ending after `offset` (or at it, when
    /// `touching`, which is what lets insert merge adjacent ranges);
    /// ranges.count if none.
    private func firstIndex(endingAfter offset: Int64, touching: Bool = false) -> Int {
        var lo = 0, hi = ranges.count
        while lo < hi {
            let mid = (lo + hi) / 2
            let end = ranges[mid].upperBound
            if touching ? end < offset : end <= offset { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    /// Index of the range holding byte `offset`, if any.
    private func index(containing offset: Int64) -> Int? {
        let i = firstIndex(endingAfter: offset)
        return i < ranges.count && ranges[i].lowerBound <= offset ? i : nil
    }

    package mutating func insert(_ r: Range<Int64>) {
        guard !r.isEmpty else { return }
        let start = firstIndex(endingAfter: r.lowerBound, touching: true)
        var end = start
        var merged = r
        while end < ranges.count && ranges[end].lowerBound <= r.upperBound {
            merged = min(merged.lowerBound, ranges[end].lowerBound)..<max(merged.upperBound, ranges[end].upperBound)
            end += 1
        }
        ranges.replaceSubrange(start..<end, with: [merged])
    }

    package mutating func remove(_ r: Range<Int64>) {
        guard !r.isEmpty else { return }
        let start = firstIndex(endingAfter: r.lowerBound)
        var end = start
        var kept: [Range<Int64>] = []
        while end < ranges.count && ranges[end].lowerBound < r.upperBound {
            let old = ranges[end]
            if old.lowerBound < r.lowerBound { kept.append(old.lowerBound..<r.lowerBound) }
            if old.upperBound > r.upperBound { kept.append(r.upperBound..<old.upperBound) }
            end += 1
        }
        ranges.replaceSubrange(start..<end, with: kept)
    }

    /// True when every byte of `r` is present; an empty range is trivially held.
    /// How many bytes of `r` are in the set.
    package func overlapCount(with r: Range<Int64>) -> Int64 {
        var count: Int64 = 0
        var i = firstIndex(endingAfter: r.lowerBound)
        while i < ranges.count && ranges[i].lowerBound < r.upperBound {
            count += Int64(ranges[i].clamped(to: r).count)
            i += 1
        }
        return count
    }

    /// Whether any byte of `r` is in the set.
    package func overlaps(_ r: Range<Int64>) -> Bool {
        guard !r.isEmpty else { return false }
        let i = firstIndex(endingAfter: r.lowerBound)
        return i < ranges.count && ranges[i].lowerBound < r.upperBound
    }

    package func contains(_ r: Range<Int64>) -> Bool {
        guard !r.isEmpty else { return true }
        guard let i = index(containing: r.lowerBound) else { return false }
        return ranges[i].upperBound >= r.upperBound
    }

    /// The holes within `r`, in order.
    package func missing(in r: Range<Int64>) -> [Range<Int64>] {
        guard !r.isEmpty else { return [] }
        var holes: [Range<Int64>] = []
        var cursor = r.lowerBound
        var i = firstIndex(endingAfter: r.lowerBound)
        while cursor < r.upperBound {
            guard i < ranges.count, ranges[i].lowerBound < r.upperBound else {
                holes.append(cursor..<r.upperBound)
                break
            }
            if ranges[i].lowerBound > cursor { holes.append(cursor..<ranges[i].lowerBound) }
            cursor = ranges[i].upperBound
            i += 1
        }
        return holes
    }

    /// End of the present run holding `offset`; `offset` itself when that byte is absent.
    package func presentEnd(from offset: Int64) -> Int64 {
        guard let i = index(containing: offset) else { return offset }
        return ranges[i].upperBound
    }

    /// The first present byte at or after `offset`.
    package func nextPresent(atOrAfter offset: Int64) -> Int64? {
        let i = firstIndex(endingAfter: offset)
        guard i < ranges.count else { return nil }
        return max(offset, ranges[i].lowerBound)
    }

    /// Inclusive byte ranges as in HTTP, e.g. `0-1048575,5242880-6291455`.
    public var description: String {
        ranges.map { "\($0.lowerBound)-\($0.upperBound - 1)" }.joined(separator: ",")
    }

    /// Parses `description` back. Only the canonical form is accepted (sorted,
    /// disjoint, not touching), so a damaged metadata file cannot slip through
    /// as a different but plausible set.
    package init?(parsing text: String) {
        self.init()
        if text.isEmpty { return }
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let bounds = part.split(separator: "-", omittingEmptySubsequences: false)
            guard bounds.count == 2,
                  let first = ByteRangeSet.parseOffset(bounds[0]),
                  let last = ByteRangeSet.parseOffset(bounds[1]),
                  first <= last, last < Int64.max else { return nil }
            if let previous = ranges.last, first <= previous.upperBound { return nil }
            ranges.append(first..<(last + 1))
        }
    }

    private static func parseOffset(_ s: Substring) -> Int64? {
        guard !s.isEmpty, s.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        return Int64(s)
    }
}
