// What the kernel asked of the daemon, counted for the stats: opens
// served by passthrough and getattr calls; and what the daemon told it:
// entry invalidations of relisted names.
import Synchronization

/// What the kernel asked of the daemon (Statistics).
final class KernelCounts: Sendable {
    let readOpens = Atomic<Int64>(0)
    let attributeRequests = Atomic<Int64>(0)
    let entryNotifications = Atomic<Int64>(0)
}
