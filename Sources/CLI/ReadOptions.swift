// How `mediafs mount`'s reads wait and fetch: their timeout and retries,
// the bandwidth caps, background jobs' daily bytes, when validators are
// checked, a closed handle's grace.
struct ReadOptions {
    /// `--timeout`: how long a read waits for missing bytes, seconds.
    var timeout: Double = 30
    /// `--retries`: transfers a read may retry, with backoff.
    var retries = 3
    /// `--bwlimit`, bytes per second.
    var bandwidthLimit: Int64?
    /// `--background-bwlimit`, bytes per second: background jobs' transfers alone.
    var backgroundBandwidthLimit: Int64?
    /// `--background-daily`, bytes a UTC day background jobs may fetch.
    var backgroundDaily: Int64?
    /// `--revalidate`: validators older than this are checked on open; nil: never.
    var revalidateAfter: Double? = 60
    /// `--handle-grace`, seconds.
    var handleGrace: Double = 5
}
