// The access pattern of one open handle, which decides how far ahead of a
// reader transfers reach. A first or random read fetches what it asks for
// (a player probing an mp4's moov must not start streaming the file);
// reads that keep following each other earn a readahead window as large as
// what the streak has read so far (so a reader that stops soon wastes little),
// up to a bound. Guarded by the lock of the file the handle reads.

public final class ReadPattern: @unchecked Sendable {
    /// Window once reads look sequential.
    public static let firstWindow: Int64 = 1 << 20
    public static let maxWindow: Int64 = 64 << 20
    /// Sequential reads needed before readahead starts.
    public static let sequentialStreak = 2
    /// The kernel sends a stream's reads from several threads, slightly out
    /// of order: a read this close to the last one still counts as following it.
    public static let sequentialSlack: Int64 = 4 << 20

    private var nextOffset: Int64 = -1
    private var streak = 0
    private var streakBytes: Int64 = 0
    private(set) var window: Int64 = 0

    public init() {}

    /// Records a read; returns whether it jumped away from the last one.
    func record(offset: Int64, end: Int64) -> Bool {
        let follows = nextOffset >= 0 && abs(offset - nextOffset) <= Self.sequentialSlack
        if follows {
            streak += 1
            streakBytes += end - offset
            if streak >= Self.sequentialStreak {
                window = min(max(streakBytes, Self.firstWindow), Self.maxWindow)
            }
            nextOffset = max(nextOffset, end)
        } else {
            streak = 0
            streakBytes = end - offset
            window = 0
            nextOffset = end
        }
        return !follows && offset != 0
    }
}
