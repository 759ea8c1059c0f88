// The first bytes of segments that a sizing fetched with their lengths
// (decision 0062), kept in memory until reads of the VOD take them: the
// head of each fMP4 segment is what the MP4 demuxer's walk reads next, and
// a TS VOD's first segment's head is its first read. Each byte is taken
// once (the loader caches what passes); a read that takes part of a head
// leaves the rest, before and after it, for the reads beside it (a read
// and its readahead start together, in either order). At most `budget`
// bytes in all, the segments kept longest ago dropped first, and none kept
// past `life`: a sizing whose reader went away costs memory for a minute.
import MediaSupport

final class SegmentHeads: Sendable {
    /// What all kept heads may take together: the heads of a few VODs'
    /// sizings (one is `SegmentSizer.headsPerVOD` parts of `headBytes`).
    static let budget = 16 << 20
    /// A head not taken within this long is dropped: a read that follows a
    /// sizing comes within seconds (the stat's process opens the file next).
    static let life = 60.0

    /// Bytes of one segment from `start`.
    private struct Piece {
        var start: Int64
        var bytes: [UInt8]
        var end: Int64 { start + Int64(bytes.count) }
    }

    private struct Head {
        /// The segment's length, from the answer the bytes came in.
        var length: Int64
        var pieces: [Piece]
        var keptAt: Double
        var count: Int { pieces.reduce(0) { $0 + $1.bytes.count } }
    }

    private struct State {
        var heads: [String: Head] = [:]
        /// Segments' URLs in the order their heads were kept, the oldest first.
        var order: [String] = []
        var bytes = 0
    }

    private let state = Locked(State())
    private let clock: Clock

    init(clock: Clock) {
        self.clock = clock
    }

    /// Keeps `bytes`, the first of a segment of `length` bytes at `url`
    /// (a whole resource: a part with a byte range has no head here).
    func keep(url: String, length: Int64, bytes: [UInt8]) {
        guard !bytes.isEmpty, bytes.count <= Self.budget else { return }
        let now = clock.monotonic()
        state.withLock { state in
            Self.drop(url, in: &state)
            Self.add(Piece(start: 0, bytes: bytes), of: url, length: length, in: &state, now: now)
        }
    }

    /// Kept bytes of the segment at `url` from byte `start` on, at most
    /// `count`, if it is of `length` bytes (another length: another version,
    /// dropped); what is taken is no longer kept.
    func take(url: String, length: Int64, from start: Int64, count: Int64) -> [UInt8]? {
        let now = clock.monotonic()
        return state.withLock { state -> [UInt8]? in
            Self.trim(&state, now: now)
            guard var head = state.heads[url] else { return nil }
            guard head.length == length else {
                Self.drop(url, in: &state)
                return nil
            }
            guard count > 0, let index = head.pieces.firstIndex(where: { $0.start <= start && start < $0.end }) else { return nil }
            let piece = head.pieces.remove(at: index)
            let from = Int(start - piece.start)
            let to = Int(min(piece.end, start + count) - piece.start)
            if from > 0 { head.pieces.append(Piece(start: piece.start, bytes: Array(piece.bytes[..<from]))) }
            if to < piece.bytes.count { head.pieces.append(Piece(start: piece.start + Int64(to), bytes: Array(piece.bytes[to...]))) }
            state.bytes -= to - from
            if head.pieces.isEmpty {
                state.heads[url] = nil
                if let at = state.order.firstIndex(of: url) { state.order.remove(at: at) }
            } else {
                state.heads[url] = head
            }
            return Array(piece.bytes[from..<to])
        }
    }

    /// Keeps again bytes taken and not delivered (their transfer was
    /// stopped first): `bytes` from byte `start` of that segment.
    func giveBack(url: String, length: Int64, bytes: [UInt8], from start: Int64) {
        guard !bytes.isEmpty else { return }
        let now = clock.monotonic()
        state.withLock { state in
            Self.add(Piece(start: start, bytes: bytes), of: url, length: length, in: &state, now: now)
        }
    }

    /// Adds `piece` to what is kept of `url` (a new head, kept now, if
    /// none), unless another length or bytes already kept say otherwise.
    private static func add(_ piece: Piece, of url: String, length: Int64, in state: inout State, now: Double) {
        if var head = state.heads[url] {
            guard head.length == length,
                  !head.pieces.contains(where: { $0.start < piece.end && piece.start < $0.end }) else { return }
            head.pieces.append(piece)
            state.heads[url] = head
        } else {
            state.heads[url] = Head(length: length, pieces: [piece], keptAt: now)
            state.order.append(url)
        }
        state.bytes += piece.bytes.count
        trim(&state, now: now)
    }

    /// Bytes kept now (for tests and the budget's check).
    var keptBytes: Int { state.withLock { $0.bytes } }

    private static func drop(_ url: String, in state: inout State) {
        guard let head = state.heads.removeValue(forKey: url) else { return }
        state.bytes -= head.count
        if let index = state.order.firstIndex(of: url) { state.order.remove(at: index) }
    }

    /// Drops the oldest heads while over the budget or past their life.
    private static func trim(_ state: inout State, now: Double) {
        while let oldest = state.order.first, let head = state.heads[oldest],
              state.bytes > budget || now - head.keptAt > life {
            drop(oldest, in: &state)
        }
    }
}
