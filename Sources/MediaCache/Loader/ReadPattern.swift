// The access pattern of one open handle, which decides how far ahead of a
// reader transfers reach. The kernel already reads ahead of a sequential
// reader; mediafs adds its own window only once a handle has read 4 MiB in
// a row, and keeps it at half of what the streak has read, so a player that
// probes a file or decodes a second after a seek leaves little fetched for
// nothing, while a long stream earns 64 MiB. A far link's round trip of bytes
// is earned the same way, from 1 MiB. Guarded by the lock of the file the handle reads.

public final class ReadPattern: @unchecked Sendable {
    /// Bytes read in a row before mediafs reads ahead at all.
    public static let streakBeforeReadahead: Int64 = 4 << 20
    public static let maxWindow: Int64 = 64 << 20
    /// The kernel sends a stream's reads from several threads, slightly out
    /// of order: a read this close to the last one still counts as following it.
    public static let sequentialSlack: Int64 = 4 << 20

    /// The content version the handle was opened on; its reads fail once
    /// the remote file changed, so no read mixes two versions.
    var generation: Int?
    /// Counted among the loader's page-cache handles of `generation`.
    var inPageCache = false
    private var nextOffset: Int64 = -1
    private var streakBytes: Int64 = 0
    /// Reads in the current streak: from the second on, a reader looks
    /// sequential (a random reader's every read starts a streak).
    private var streakReads = 0
    /// A read this big is the kernel reading ahead of a reader it thinks
    /// streams (or one reading big pieces): the first read after a seek.
    public static let largeRead: Int64 = 32 << 10

    /// Whether the reader streams, or starts to: its fetches may be sized
    /// to the link rather than to the read.
    var looksSequential: Bool { streakReads > 1 || streakBytes >= Self.largeRead }
    /// Whether the reader has read on from where it was twice or more: a
    /// stream, whose fetches may be long ones (not a single large read,
    /// which a random reader's reads can each be).
    var streams: Bool { readClass == .play && streakReads > 1 }
    private(set) var window: Int64 = 0
    /// A link-sized fetch of a fresh streak (after a seek, at the start)
    /// reaches this far at most, and more only as the streak grows: a round
    /// trip of a fast link, or of a local server slow to answer, came to
    /// 8 MiB fetched for a 32 KiB read. The bench's links (625 KB, 1 MB a
    /// round trip) fit under it whole.
    public static let linkStart: Int64 = 1 << 20

    /// Who the handle reads for, decided at its open: a scan's reads
    /// fetch only what they ask for (no window, no link-sized fetch).
    public let readClass: ReadClass

    public init(readClass: ReadClass = .play) {
        self.readClass = readClass
    }

    /// How far a fetch for this handle reaches ahead of its read, given a
    /// link that holds `bytesPerRoundTrip` in flight: a reader that looks
    /// sequential gets that round trip (less leaves the link idle while it
    /// comes back for more), up to half its streak or `linkStart`.
    public func fetchWindow(bytesPerRoundTrip: Int64) -> Int64 {
        guard readClass == .play else { return 0 }
        guard looksSequential, bytesPerRoundTrip > window else { return window }
        return min(bytesPerRoundTrip, max(streakBytes / 2, Self.linkStart))
    }

    /// Whether the handle has read anything yet.
    var hasRead: Bool { nextOffset >= 0 }

    /// Whether a read at `offset` would follow this handle's last one.
    func follows(_ offset: Int64) -> Bool {
        nextOffset >= 0 && abs(offset - nextOffset) <= Self.sequentialSlack
    }

    /// A new handle of the same reader (it closed and opened the file
    /// again, as Plex and ffmpeg do) goes on with the closed one's streak
    /// and window, not from cold.
    func resume(from closed: ReadPattern) {
        firstStreakStart = -1
        nextOffset = closed.nextOffset
        streakBytes = closed.streakBytes
        streakReads = closed.streakReads
        window = closed.window
    }

    /// Where its first read began (-1: none yet), while it has not
    /// jumped since: a handle that may be a closed one's sequel.
    private(set) var firstStreakStart: Int64 = -1

    /// The handle was opened before the one it goes on from was released
    /// (FUSE sends a release after the close, and the reopen may overtake
    /// it): it adds the closed handle's streak to its own.
    func inherit(_ closed: ReadPattern) {
        streakBytes += closed.streakBytes
        streakReads += closed.streakReads
        window = streakBytes < Self.streakBeforeReadahead || readClass == .scan
            ? 0 : min(streakBytes / 2, Self.maxWindow)
    }

    /// Records a read; returns whether it jumped away from the last one.
    func record(offset: Int64, end: Int64) -> Bool {
        let follows = nextOffset >= 0 && abs(offset - nextOffset) <= Self.sequentialSlack
        if nextOffset < 0 { firstStreakStart = offset } else if !follows { firstStreakStart = -1 }
        if follows {
            streakBytes += end - offset
            streakReads += 1
            nextOffset = max(nextOffset, end)
        } else {
            streakBytes = end - offset
            streakReads = 1
            nextOffset = end
        }
        window = streakBytes < Self.streakBeforeReadahead || readClass == .scan
            ? 0 : min(streakBytes / 2, Self.maxWindow)
        return !follows && offset != 0
    }
}
