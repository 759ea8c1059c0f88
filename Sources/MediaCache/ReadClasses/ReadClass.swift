// Who a handle reads for: a player (anything not known to be a scanner)
// or a library scan (ffprobe, mediainfo, a media server's scanner). A scan
// gets no kernel readahead and only half a run it reads on from mediafs
// (ReadPattern), waits behind playback for the origin's connections
// and lives in a cache budget of its own; a player's bytes are never
// pushed out to make room for a scan's.
import MediaNetwork

public enum ReadClass: Int, Sendable, CaseIterable, Equatable {
    case play = 0, scan

    /// The name shown in stats, status and metrics.
    public var label: String { self == .play ? "play" : "scan" }

    /// The priority a read of this class waits at for the network.
    var readPriority: FetchRequest.Priority { self == .play ? .read : .scan }
}
