// The access pattern of one open handle, which decides how far ahead of a
// reader transfers reach. The kernel already reads ahead of a sequential
// reader (up to 1 MiB); mediafs adds its own window only once a handle has
// read 4 MiB in a row, and keeps it at half of what the streak has
// read, so a player that probes a file or decodes a second after a seek
// leaves little fetched for nothing, while a long stream earns 64 MiB.
// Guarded by the lock of the file the handle reads.

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
    private(set) var window: Int64 = 0

    public init() {}

    /// Records a read; returns whether it jumped away from the last one.
    func record(offset: Int64, end: Int64) -> Bool {
        let follows = nextOffset >= 0 && abs(offset - nextOffset) <= Self.sequentialSlack
        if follows {
            streakBytes += end - offset
            streakReads += 1
            nextOffset = max(nextOffset, end)
        } else {
            streakBytes = end - offset
            streakReads = 1
            nextOffset = end
        }
        window = streakBytes < Self.streakBeforeReadahead ? 0 : min(streakBytes / 2, Self.maxWindow)
        return !follows && offset != 0
    }
}
