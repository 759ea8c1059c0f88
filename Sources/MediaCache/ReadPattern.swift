// The access pattern of one open handle, which decides how far past a hole
// a new transfer reaches: sequential reads grow the window, a seek resets it.
// Guarded by the lock of the file the handle reads.

public final class ReadPattern: @unchecked Sendable {
    /// First window after a seek: enough for a player's probe, little waste.
    public static let minWindow: Int64 = 256 * 1024
    /// First window once reads look sequential.
    public static let sequentialWindow: Int64 = 1 << 20
    public static let maxWindow: Int64 = 64 << 20

    private var nextOffset: Int64 = -1
    private(set) var window: Int64 = ReadPattern.minWindow

    public init() {}

    /// Records a read and returns the readahead window for it.
    func record(offset: Int64, end: Int64) -> Int64 {
        if offset == nextOffset {
            window = min(max(window * 2, Self.sequentialWindow), Self.maxWindow)
        } else if offset != 0 {
            window = Self.minWindow
        }
        nextOffset = end
        return window
    }
}
