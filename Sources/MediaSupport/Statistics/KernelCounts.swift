// What the kernel asked of the daemon, counted for the stats: opens
// served by passthrough and getattr calls.
import Synchronization

/// What the kernel asked of the daemon (Statistics).
final class KernelCounts: Sendable {
    let readOpens = Atomic<Int64>(0)
    let attributeRequests = Atomic<Int64>(0)
}
