// What a demuxer will read next, told from a file's first bytes: the
// container is known by its bytes (an EBML header, an `ftyp` box, TS sync
// bytes every 188 or 192 bytes), never by the name, and its index is where
// the head says it is. A pure function of the head and the file's length,
// so a wrong or hostile head costs at most `maxBytes` fetched for nothing,
// never a wrong byte: every number read is bounded and checked.
//
// What each container costs (docs/decisions/0015-container-lookahead.md):
// - MP4 with `moov` after `mdat` (ffmpeg's default): the rest of the file
//   from `mdat`'s end, which is `moov` (and what follows it); a `moov`
//   before `mdat` that runs past the head: the rest of that `moov`.
// - Matroska: the SeekHead's targets past the head (Info, Tracks, Tags,
//   Chapters, Attachments, Cues, a second SeekHead), from the first of them
//   to the end of the file when that is within `maxBytes` (ffmpeg and
//   mkvmerge write them there), else `targetGuess` at each; Cues in the same
//   wave, so the first seek reads its cue points from the cache.
// - MPEG-TS (and M2TS): the last 250,000 bytes, where ffmpeg's duration
//   estimate reads first (size − 250,000·2^k).

public enum ContainerSniffer {
    public enum Container: String, Sendable, Equatable {
        case mp4, matroska, mpegTS = "mpeg-ts"
    }

    public enum Decision: Equatable, Sendable {
        /// The head is too short to tell yet.
        case needMore
        /// Not a container this knows, or one whose head holds its index.
        case nothing
        /// Ranges the demuxer reads next (they may overlap bytes present or
        /// on their way: the loader fetches only the rest).
        case fetch(Container, [Range<Int64>])
    }

    /// The head bytes looked at, at most: a SeekHead or a box walk that
    /// needs more says nothing.
    public static let maxHead = 64 << 10
    /// What one file's lookahead fetches at most.
    public static let maxBytes: Int64 = 16 << 20
    /// Where Matroska's targets are far from the end: this much at each.
    public static let targetGuess: Int64 = 256 << 10
    /// Where ffmpeg's MPEG-TS duration estimate first reads: this far from the end.
    public static let tsTail: Int64 = 250_000

    /// What to fetch for a file of `length` bytes whose first bytes are `head`.
    public static func decide(head: [UInt8], length: Int64) -> Decision {
        guard length > 0 else { return .nothing }
        let complete = Int64(head.count) >= length || head.count >= maxHead
        if head.count >= 4, head[0] == 0x1A, head[1] == 0x45, head[2] == 0xDF, head[3] == 0xA3 {
            return matroska(head, length: length) ?? (complete ? .nothing : .needMore)
        }
        if head.count >= 8, head[4] == 0x66, head[5] == 0x74, head[6] == 0x79, head[7] == 0x70 {  // "ftyp"
            return mp4(head, length: length) ?? (complete ? .nothing : .needMore)
        }
        for stride in [188, 192] {
            let first = stride - 188
            if head.count > first, head[first] == 0x47 {
                guard head.count > first + 2 * stride else { return complete ? .nothing : .needMore }
                if head[first + stride] == 0x47, head[first + 2 * stride] == 0x47 {
                    return .fetch(.mpegTS, clipped([max(0, length - tsTail)..<length], length: length))
                }
            }
        }
        return head.count >= 8 || complete ? .nothing : .needMore
    }

    /// Ranges within the file, in order, `maxBytes` in all.
    static func clipped(_ ranges: [Range<Int64>], length: Int64) -> [Range<Int64>] {
        var left = maxBytes
        var out: [Range<Int64>] = []
        for range in ranges {
            let lower = max(0, range.lowerBound)
            let upper = min(length, range.upperBound, lower + left)
            guard upper > lower else { continue }
            out.append(lower..<upper)
            left -= upper - lower
        }
        return out
    }

    // MARK: MP4

    /// Walks the top-level boxes; nil: the head ends before the answer.
    static func mp4(_ head: [UInt8], length: Int64) -> Decision? {
        var offset: Int64 = 0
        while offset < length {
            switch box(head, at: offset, length: length) {
            case .needMore: return nil
            case .bad: return .nothing
            case .box(let type, _, let end):
                switch type {
                case "moov":
                    // Whole in the head already, or the rest of it.
                    return end <= Int64(head.count) ? .nothing : .fetch(.mp4, clipped([offset..<end], length: length))
                case "mdat":
                    // Media before the index: the index is after it.
                    return end < length ? .fetch(.mp4, clipped([end..<length], length: length)) : .nothing
                case "moof":
                    // A fragmented file's moov came first: nothing to fetch.
                    return .nothing
                default:
                    offset = end
                }
            }
        }
        return .nothing
    }

    /// Where an MP4 whose index follows its media has its first sample:
    /// the start of `mdat`'s data, where ffmpeg's muxer puts its first
    /// chunk and where a demuxer that has read the `moov` reads next. Nil
    /// for any other head (moov first, fragmented, not an MP4).
    static func mp4FirstSample(head: [UInt8], length: Int64) -> Int64? {
        guard head.count >= 8, head[4] == 0x66, head[5] == 0x74, head[6] == 0x79, head[7] == 0x70 else { return nil }
        var offset: Int64 = 0
        while offset < length {
            guard case .box(let type, let header, let end) = box(head, at: offset, length: length) else { return nil }
            switch type {
            case "mdat": return end < length ? offset + header : nil
            case "moov", "moof": return nil
            default: offset = end
            }
        }
        return nil
    }

    enum Box {
        case needMore, bad
        /// Its type, header length, and where it ends.
        case box(type: String, header: Int64, end: Int64)
    }

    /// The top-level box at `offset` (32-bit size, `largesize` when 1, to
    /// the end of the file when 0), bounded by the file's length.
    static func box(_ head: [UInt8], at offset: Int64, length: Int64) -> Box {
        guard offset + 8 <= Int64(head.count) else { return .needMore }
        let at = Int(offset)
        var size = Int64(be(head, at, 4))
        var header: Int64 = 8
        if size == 1 {
            guard offset + 16 <= Int64(head.count) else { return .needMore }
            let large = be(head, at + 8, 8)
            guard large <= UInt64(Int64.max) else { return .bad }
            size = Int64(large)
            header = 16
        } else if size == 0 {
            size = length - offset
        }
        let (end, overflow) = offset.addingReportingOverflow(size)
        guard size >= header, !overflow, end <= length else { return .bad }
        return .box(type: String(decoding: head[(at + 4)..<(at + 8)], as: UTF8.self), header: header, end: end)
    }

    static func be(_ bytes: [UInt8], _ at: Int, _ count: Int) -> UInt64 {
        bytes[at..<(at + count)].reduce(0) { $0 << 8 | UInt64($1) }
    }

    // MARK: Matroska

    static let ebmlHeader: UInt64 = 0x1A45DFA3
    static let segment: UInt64 = 0x18538067
    static let seekHead: UInt64 = 0x114D9B74
    static let seek: UInt64 = 0x4DBB
    static let seekID: UInt64 = 0x53AB
    static let seekPosition: UInt64 = 0x53AC
    static let cluster: UInt64 = 0x1F43B675

    /// An element's header read from the head.
    enum Header {
        /// The head ends inside it.
        case needMore
        case bad
        /// Its ID (marker bits kept, as the spec writes IDs), data size
        /// (nil: unknown) and where its data begins.
        case element(id: UInt64, size: UInt64?, data: Int)
    }

    static func element(_ head: [UInt8], at: Int) -> Header {
        guard at < head.count else { return .needMore }
        guard head[at] != 0, head[at].leadingZeroBitCount < 4 else { return .bad }
        guard let (id, idLength) = vint(head, at: at, keepMarker: true) else { return .needMore }
        let sizeAt = at + idLength
        guard sizeAt < head.count else { return .needMore }
        guard head[sizeAt] != 0 else { return .bad }
        guard let (size, sizeLength) = vint(head, at: sizeAt, keepMarker: false) else { return .needMore }
        let unknown = size == (UInt64(1) << (7 * UInt64(sizeLength))) - 1
        return .element(id: id, size: unknown ? nil : size, data: sizeAt + sizeLength)
    }

    /// An EBML variable-length integer at `at`: its value and length; nil
    /// past the head or for a first byte of 0 (longer than 8 bytes).
    static func vint(_ head: [UInt8], at: Int, keepMarker: Bool) -> (UInt64, Int)? {
        guard at < head.count, head[at] != 0 else { return nil }
        let length = head[at].leadingZeroBitCount + 1
        guard at + length <= head.count else { return nil }
        var value = UInt64(keepMarker ? head[at] : head[at] & (0xFF >> length))
        for byte in head[(at + 1)..<(at + length)] { value = value << 8 | UInt64(byte) }
        return (value, length)
    }

    /// Follows EBML header, Segment and SeekHead; nil: the head ends first.
    static func matroska(_ head: [UInt8], length: Int64) -> Decision? {
        guard case .element(ebmlHeader, let headerSize?, let headerData) = element(head, at: 0) else {
            if case .needMore = element(head, at: 0) { return nil }
            return .nothing
        }
        guard headerSize < UInt64(head.count) else { return nil }
        let segmentAt = headerData + Int(headerSize)
        let segmentHeader = element(head, at: segmentAt)
        if case .needMore = segmentHeader { return nil }
        guard case .element(segment, _, let segmentData) = segmentHeader else { return .nothing }
        let segmentStart = Int64(segmentData)
        var targets: [Int64] = []
        var at = segmentData
        // The Segment's children in the head, up to the first Cluster.
        walk: while at < head.count {
            switch element(head, at: at) {
            case .needMore: return nil
            case .bad: break walk
            case .element(let id, let size, let data):
                guard let size, size <= UInt64(length), id != cluster else { break walk }
                let (end, overflow) = data.addingReportingOverflow(Int(size))
                guard !overflow else { break walk }
                if id == seekHead {
                    guard end <= head.count else { return nil }
                    guard let found = seekTargets(head, in: data..<end) else { return .nothing }
                    for position in found {
                        let (target, overflow) = segmentStart.addingReportingOverflow(position)
                        if !overflow, target < length { targets.append(target) }
                    }
                }
                at = end
            }
        }
        let beyond = targets.filter { $0 >= Int64(head.count) }.sorted()
        guard let first = beyond.first else { return .nothing }
        if length - first <= maxBytes { return .fetch(.matroska, [first..<length]) }
        var ranges: [Range<Int64>] = []
        for target in beyond where !ranges.contains(where: { $0.contains(target) }) {
            ranges.append(target..<min(length, target + targetGuess))
        }
        return .fetch(.matroska, clipped(ranges, length: length))
    }

    /// The SeekPositions of a SeekHead's Seek entries (Clusters excluded);
    /// nil when malformed.
    static func seekTargets(_ head: [UInt8], in range: Range<Int>) -> [Int64]? {
        var positions: [Int64] = []
        var at = range.lowerBound
        while at < range.upperBound {
            guard case .element(let entryID, let entrySize?, let entryData) = element(head, at: at),
                  entrySize <= UInt64(range.upperBound - entryData) else { return nil }
            let end = entryData + Int(entrySize)
            if entryID == seek {
                var id: UInt64?
                var position: UInt64?
                var inner = entryData
                while inner < end {
                    guard case .element(let fieldID, let fieldSize?, let fieldData) = element(head, at: inner),
                          fieldSize <= UInt64(end - fieldData), fieldSize <= 8 else { return nil }
                    let value = be(head, fieldData, Int(fieldSize))
                    if fieldID == seekID { id = value }
                    if fieldID == seekPosition { position = value }
                    inner = fieldData + Int(fieldSize)
                }
                if let id, let position, id != cluster, position <= UInt64(Int64.max) {
                    positions.append(Int64(position))
                }
            }
            at = end
        }
        return positions
    }
}
