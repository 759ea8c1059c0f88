// How reads of a file made of parts fetch (a segmented VOD: its parts'
// offsets come from the fetcher, `Fetching.partOffsets`, once known;
// decision 0020).
// - Each part is asked for on its own: a fetch that crosses a segment's
//   start, served behind one transfer, would be two requests one after the
//   other.
// - A scan that reads on fetches the rest of its part, the unit an HLS
//   client fetches whole, not a round trip a read.
// - A reader that jumps from one part to the start of the next walks the
//   parts: the MP4 demuxer indexing a fragmented MP4 (a moof at each
//   segment's start, then a jump past its mdat). Its read fetches only
//   what it asks for (link-sized fetches would fetch the whole file), and
//   the heads of the next parts, each the size of that read, at once, not
//   a round trip a fragment (at an HTTP/2 origin in one round trip; over
//   HTTP/1 a few at a time, in the places readahead has).
import MediaNetwork
import MediaSupport
import MediaStore

extension FileLoader {
    /// Parts whose heads a walk keeps fetched or on their way ahead of it:
    /// two rounds of an origin's connections.
    static let partsAhead = 16
    /// A scan's fetch of the rest of a part reaches this far at most.
    static let maxPartRest: Int64 = 8 << 20
    static let page: Int64 = 4096

    /// The index of the part holding `offset` (offsets: part starts, then the length).
    static func part(containing offset: Int64, in offsets: [Int64]) -> Int {
        var (low, high) = (0, offsets.count - 2)
        while low < high {
            let middle = (low + high + 1) / 2
            if offsets[middle] <= offset { low = middle } else { high = middle - 1 }
        }
        return max(low, 0)
    }

    /// Called with each read as it is recorded (`previousEnd`: where the
    /// handle's read before it ended): notes how it stepped through the
    /// parts and, when it walks them, starts the next parts' heads. A
    /// jump within the pattern's slack still follows a stream there, so the
    /// walk is told by offsets, not by the streams.
    func notePartStep(_ wanted: Range<Int64>, after previousEnd: Int64, pattern: ReadPattern, info: ContentInfo,
                      in state: inout LoaderState) {
        pattern.partStep = .other
        guard let offsets = fetcher.partOffsets(of: source.url), offsets.count > 2 else { return }
        if previousEnd == wanted.lowerBound {
            pattern.partStep = .contiguous
            return
        }
        // The kernel reads whole pages: a read through the page cache of a
        // part's start begins up to a page before it.
        let index = Self.part(containing: wanted.lowerBound + Self.page - 1, in: offsets)
        guard index > 0, offsets[index] - wanted.lowerBound < Self.page, offsets[index] >= wanted.lowerBound,
              offsets[index - 1] < previousEnd, previousEnd < wanted.lowerBound else { return }
        pattern.partStep = .walk
        // Bytes read ahead while the cache cannot be written would be lost.
        guard statistics.cacheWritable, info.acceptsRanges else { return }
        // Each head is the size of this read: the MP4 demuxer reads each
        // moof with one buffer's read (32 KiB; through the page cache 9
        // pages from the one holding the part's start); larger heads only
        // fetch more for the same requests (decision 0020).
        let size = Int64(wanted.count)
        let priority: FetchRequest.Priority = pattern.readClass.aheadPriority
        for next in (index + 1)..<min(index + 1 + Self.partsAhead, offsets.count - 1) {
            // The page cache's reads begin at the page that holds the start.
            let start = pattern.inPageCache ? offsets[next] / Self.page * Self.page : offsets[next]
            let head = start..<min(start + size, offsets[next + 1])
            guard let hole = state.bytes.present.missing(in: head).first,
                  !state.fetches.transfers.values.contains(where: { covers($0, hole.lowerBound, in: state) }) else { continue }
            // The loader's own, not the handle's: its next read jumps, and a
            // jump stops the handle's transfers that it does not need.
            _ = startPartTransfers(at: hole.lowerBound, end: head.upperBound, hold: nil, owner: ObjectIdentifier(self),
                                   info: info, priority: priority, readClass: pattern.readClass, in: &state)
        }
    }

    /// How far a fetch for this handle reaches from `wanted`'s start in a
    /// file of parts, and how far its readahead reaches past it, given
    /// `window`, what both would be in any file.
    func partWindows(_ wanted: Range<Int64>, window: Int64, pattern: ReadPattern) -> (fetch: Int64, ahead: Int64) {
        guard let offsets = fetcher.partOffsets(of: source.url), offsets.count > 2 else { return (window, window) }
        if pattern.partStep == .walk { return (0, 0) }
        guard !pattern.readClass.plays, !pattern.readsAhead, pattern.partStep == .contiguous, !wanted.isEmpty
        else { return (window, window) }
        // The rest of the part, never into the next: nothing reads ahead.
        let index = Self.part(containing: wanted.upperBound - 1, in: offsets)
        return (max(window, min(offsets[index + 1] - wanted.lowerBound, Self.maxPartRest)), window)
    }

    /// `startTransfer`, one transfer for each part `start..<end` crosses
    /// (a held transfer stays one: only a file of one resource has those).
    /// Returns where the last one reaches.
    func startPartTransfers(at start: Int64, end: Int64, hold: Int64?, owner: ObjectIdentifier,
                            account: ReaderAccount? = nil, info: ContentInfo, priority: FetchRequest.Priority,
                            readClass: ReadClass, mustReach: Int64 = 0, in state: inout LoaderState) -> Int64 {
        guard hold == nil, let offsets = fetcher.partOffsets(of: source.url), offsets.count > 2 else {
            return startTransfer(at: start, end: end, hold: hold, owner: owner, account: account, info: info,
                                 priority: priority, readClass: readClass, mustReach: mustReach, in: &state)
        }
        var point = start
        while point < min(end, info.length) {
            let cut = min(end, offsets[Self.part(containing: point, in: offsets) + 1])
            let reached = startTransfer(at: point, end: cut, owner: owner, account: account, info: info,
                                        priority: priority, readClass: readClass, mustReach: min(mustReach, cut),
                                        in: &state)
            // Short of the part's end: a present byte, a transfer, the budget.
            if reached < cut { return reached }
            point = reached
        }
        return point
    }
}
