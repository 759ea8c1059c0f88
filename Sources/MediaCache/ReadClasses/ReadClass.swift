// Who a handle reads for: a player (anything not known to be otherwise), a
// library scan (ffprobe, mediainfo, a media server's scanner), or a
// background job no one watches (trickplay, loudness, intro detection,
// subtitle extraction: ProcessClassifier's rules). A scan and a background
// job get no kernel readahead and only half a run they read on from
// mediafs (ReadPattern), wait behind playback for the origin's connections
// and live in a cache budget of their own; a player's bytes are never
// pushed out to make room for theirs. A background job waits behind
// scans too, pauses while a player reads, and may be held to a rate and a
// daily budget.
import MediaNetwork

public enum ReadClass: Int, Sendable, CaseIterable, Equatable {
    case play = 0, scan, background

    /// The name shown in stats, status and metrics.
    public var label: String {
        switch self {
        case .play: "play"
        case .scan: "scan"
        case .background: "background"
        }
    }

    /// Whether it is a player's: read ahead of, streamed in long
    /// transfers, its bytes kept before a scan's or a job's.
    public var plays: Bool { self == .play }

    /// The priority a read of this class waits at for the network.
    var readPriority: FetchRequest.Priority {
        switch self {
        case .play: .read
        case .scan: .scan
        case .background: .background
        }
    }

    /// The priority of what is fetched ahead of its reads.
    var aheadPriority: FetchRequest.Priority { self == .play ? .readahead : readPriority }
}
