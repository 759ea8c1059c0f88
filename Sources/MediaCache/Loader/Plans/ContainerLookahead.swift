// One file's container lookahead (ContainerSniffer): the first bytes to
// arrive from the network are collected as they pass, until the sniffer
// can tell what the demuxer reads next; those ranges are then fetched at
// once, in the round trip after the head's, instead of one round trip each
// when the demuxer gets there (an MP4's moov after its mdat, a Matroska
// file's Cues, an MPEG-TS's tail). Only a cold file's head is looked at:
// bytes read back from the cache send nothing new. Guarded by the loader's lock.

struct ContainerLookahead {
    enum Phase: Equatable {
        /// Taking the head's bytes as they arrive.
        case collecting
        /// Told: these ranges wait for a handle to open (a stat alone
        /// fetches nothing more).
        case planned([Range<Int64>], ContainerSniffer.Container)
        /// Started, or nothing to do.
        case done
    }

    private(set) var phase: Phase
    private var head: [UInt8] = []
    /// What the head showed the file to be; nil until sniffed (or when its
    /// head came from the cache: only a cold head is looked at).
    private(set) var container: ContainerSniffer.Container?
    /// Where the demuxer reads its first sample once it has the index (an
    /// MP4's mdat data when the moov follows it); nil when not told.
    private(set) var firstSample: Int64?

    /// `cold`: the file has no byte cached yet.
    init(cold: Bool) {
        phase = cold ? .collecting : .done
    }

    /// Bytes `chunk` of a file of `length` bytes arrived from the network
    /// (`bytes` holds them); true when this made the plan.
    mutating func take(_ bytes: UnsafeRawBufferPointer, at chunk: Range<Int64>, length: Int64) -> Bool {
        guard case .collecting = phase else { return false }
        let have = Int64(head.count)
        // Only the head, in order: bytes after a gap wait for the gap.
        guard chunk.lowerBound <= have, chunk.upperBound > have else { return false }
        let upper = min(chunk.upperBound, Int64(ContainerSniffer.maxHead))
        if upper > have {
            let from = Int(have - chunk.lowerBound)
            head.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[from..<(from + Int(upper - have))]))
        }
        switch ContainerSniffer.decide(head: head, length: length) {
        case .needMore:
            return false
        case .nothing:
            finish()
            return false
        case .fetch(let container, let ranges):
            self.container = container
            firstSample = container == .mp4 ? ContainerSniffer.mp4FirstSample(head: head, length: length) : nil
            head = []
            phase = ranges.isEmpty ? .done : .planned(ranges, container)
            return !ranges.isEmpty
        }
    }

    /// The plan, once: the ranges are then the loader's to start.
    mutating func takePlan() -> ([Range<Int64>], ContainerSniffer.Container)? {
        guard case .planned(let ranges, let container) = phase else { return nil }
        phase = .done
        return (ranges, container)
    }

    /// Nothing more to look at (a new version starts collecting anew).
    mutating func finish() {
        head = []
        phase = .done
    }
}
