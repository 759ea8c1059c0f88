// `--bwlimit`: one token bucket for the whole mount, kept by the network
// thread. Reads draw first; readahead and preload draw only what is left
// above a reserve while more urgent transfers run, plus a small floor of
// their own so they are never starved for good. Bookkeeping only: the
// fetcher brings the clock and pauses the transfers this refuses.
//
// Why not CURLOPT_MAX_RECV_SPEED_LARGE: it caps each transfer alone, over
// libcurl's own averaging window, and its man page does not say that a new
// value reaches a running transfer (curl issue #6162 reports it does not);
// shares would be wasted on transfers the server feeds slowly.
import MediaSupport

/// Not Sendable: the network thread's alone (its CurlFetcher holds it).
package final class BandwidthLimit {
    /// Below this a 16 KiB piece would wait several seconds.
    package static let minRate: Int64 = 4 << 10
    /// The part of the rate kept for background transfers while reads run.
    package static let floorShare = 1.0 / 16
    /// A paused transfer resumes once this much is free for it: a few of
    /// libcurl's 16 KiB pieces, so the network thread wakes some hundred
    /// times a second at most, not once per piece.
    package static let resumeSize = 64 << 10

    /// Bytes per second.
    package let rate: Double
    /// What may build up while transfers run, a tenth of a second's worth,
    /// and at least one receive buffer so any piece can pass. Idle time
    /// earns nothing, so no transfer ever starts above the rate.
    package let capacity: Double
    private(set) var tokens = 0.0
    /// Background transfers' own share while reads run.
    private(set) var floorTokens = 0.0
    private var last: Double?
    /// Priorities of the transfers running now.
    private var running: Set<FetchRequest.Priority> = []

    /// nil for a rate below `minRate` or past `Limits.maxLength`.
    package init?(bytesPerSecond: Int64) {
        guard bytesPerSecond >= Self.minRate, Limits.isLength(bytesPerSecond) else { return nil }
        rate = Double(bytesPerSecond)
        capacity = max(rate / 10, Double(CurlFetcher.receiveBufferSize))
    }

    /// Adds what the time since the last call earned, given the priorities
    /// of the transfers running now (`now` in seconds, monotonic).
    package func refill(now: Double, running: Set<FetchRequest.Priority>) {
        defer { last = now; self.running = running }
        // Only time with transfers running earns: after idle (the network
        // thread may have slept a second), a transfer starts from nothing.
        guard !running.isEmpty, !self.running.isEmpty, let last else {
            tokens = 0
            floorTokens = 0
            return
        }
        let earned = rate * max(now - last, 0)
        if running.count > 1 {
            floorTokens = min(floorTokens + earned * Self.floorShare, capacity)
            tokens = min(tokens + earned * (1 - Self.floorShare), capacity)
        } else {
            tokens = min(tokens + earned + floorTokens, capacity)
            floorTokens = 0
        }
    }

    /// What a transfer of `priority` must leave in the bucket for more urgent ones.
    private func reserve(for priority: FetchRequest.Priority) -> Double {
        running.contains { $0 < priority } ? capacity / 2 : 0
    }

    /// Takes `count` bytes for a transfer of `priority`; false: pause it.
    package func take(_ count: Int, priority: FetchRequest.Priority) -> Bool {
        let need = min(Double(count), capacity)
        let reserve = reserve(for: priority)
        if tokens - reserve >= need {
            tokens -= Double(count)
            return true
        }
        if reserve > 0, floorTokens >= need {
            floorTokens -= Double(count)
            return true
        }
        return false
    }

    /// Whether a paused transfer of `priority` would get its next piece now.
    package func mayResume(_ priority: FetchRequest.Priority) -> Bool {
        let need = min(Double(Self.resumeSize), capacity)
        let reserve = reserve(for: priority)
        return tokens - reserve >= need || (reserve > 0 && floorTokens >= need)
    }

    /// Seconds until a paused transfer of `priority` may resume.
    package func wait(for priority: FetchRequest.Priority) -> Double {
        let need = min(Double(Self.resumeSize), capacity)
        let reserve = reserve(for: priority)
        let shared = (need + reserve - tokens) / rate
        guard reserve > 0 else { return max(shared, 0) }
        let floor = (need - floorTokens) / (rate * Self.floorShare)
        return max(min(shared, floor), 0)
    }
}
