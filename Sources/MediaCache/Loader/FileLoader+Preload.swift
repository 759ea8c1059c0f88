// A preload (`user.mediafs.preload`, `--preload-next`): the first bytes of
// a file fetched in the background at preload priority, as a player's.
import Foundation

extension FileLoader {
    /// Fetches the first `limit` bytes (nil: all) in the background at
    /// preload priority; `limit` 0 stops a preload.
    public func preload(limit: Int64?) throws {
        prepareEntry()
        _ = try contentInfo()
        lock.withLock { state in
            // The info of now, under the lock its transfers start under: one
            // read before it could name a version a change has replaced since.
            guard let info = state.version.info else { return }
            let owner = preloadOwner
            // Asked for by a user: a player's bytes.
            state.played()
            cancelTransfers(of: owner, except: nil, in: &state)
            let end = min(limit ?? info.length, info.length)
            for hole in state.bytes.present.missing(in: 0..<end) {
                var point = hole.lowerBound
                while point < hole.upperBound {
                    if let (id, covering) = state.fetches.transfers.first(where: { covers($0.value, point, in: state) }) {
                        if covering.limit != nil {
                            extendHold(id, to: hole.upperBound, mustReach: 0, in: &state)
                        }
                        // No room to let it go further: preloading would only
                        // fetch bytes to drop.
                        guard state.fetches.transfers[id]!.reach > point else { return }
                        point = state.fetches.transfers[id]!.reach
                    } else {
                        let start = point
                        point = startTransfer(at: point, end: hole.upperBound, owner: owner, info: info,
                                              priority: .preload, in: &state)
                        // No room under the cache limits: preloading would only fetch bytes to drop.
                        if point == start { return }
                    }
                }
            }
        }
    }
}
