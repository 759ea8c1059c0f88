// The catalog's upkeep: the flusher thread that saves metadata and applies
// the cache limits, the evictor that applies them, the room under the
// limits new bytes take (`CacheBudget`, which wakes the flusher when it is
// pressed), and the count of probe answers saved since the heap was last
// trimmed. Made with the catalog; the catalog's passes run on its thread
// (Catalog+Flushing.swift).
final class CatalogMaintenance: Sendable {
    let flusher = Flusher(interval: Catalog.flushInterval)
    /// Nil: no limits (`--cache-max-size` and its kind unset).
    let evictor: CacheEvictor?
    /// Room under the limits for new bytes, so they hold at every instant.
    let budget: CacheBudget?
    /// Probe answers saved since the heap was last trimmed (the flusher's).
    let answersSaved = Locked(0)

    init(store: CacheStore, limits: CacheLimits?) {
        evictor = limits.map { CacheEvictor(store: store, limits: $0) }
        let flusher = self.flusher
        budget = limits.map { _ in CacheBudget { flusher.wake() } }
    }

    /// Whether a pass is due now for the room's sake: a scan that found no
    /// room presses only the scan budget, and its pass must run then too (a
    /// scan's read that missed waited for room 2 s until the next timed
    /// pass, so 40 Jellyfin probes under a full scan budget took 25 s, not 3).
    var isPressed: Bool { budget.map { $0.isPressed || $0.isScanPressed } ?? false }
}
