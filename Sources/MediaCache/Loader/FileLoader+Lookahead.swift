// The container lookahead's fetches (ContainerLookahead): what the demuxer
// will read next, asked for as soon as the head has told where it is. They
// are the loader's own transfers, not a handle's (a handle's seek stops
// its own, and the demuxer's next read is such a seek), at readahead's
// place in the network's queue (a scan's for a scan's file), so they never
// go ahead of a read that waits; they fetch only what fits under the cache
// limits, and stop when the file's last handle closes.
import MediaNetwork
import MediaSupport

extension FileLoader {
    /// The owner of the lookahead's transfers.
    var lookaheadOwner: ObjectIdentifier { ObjectIdentifier(lookaheadToken) }

    /// Starts the planned ranges if a handle is open: those not present
    /// and not on their way.
    func startLookahead(in state: inout LoaderState) {
        guard state.handles.openHandles > 0, let info = state.version.info, info.acceptsRanges, statistics.cacheWritable,
              let (ranges, container) = state.lookahead.takePlan() else { return }
        let readClass: ReadClass = state.use.scanOnly ? .scan : .play
        let priority: FetchRequest.Priority = readClass.aheadPriority
        var asked: [Range<Int64>] = []
        for range in ranges {
            // From the page that holds its start: a player's handle reads
            // through the page cache, whole pages (a Cues 1,228 bytes from
            // the end took a request of its own for the page before them).
            let range = range.lowerBound / Self.page * Self.page..<range.upperBound
            // The container's index: a scan's file keeps it when trimmed.
            if state.use.scanOnly { state.bytes.noteScanRead(range) }
            for hole in state.bytes.present.missing(in: range) {
                var point = hole.lowerBound
                while point < hole.upperBound {
                    if let running = state.fetches.transfers.values.first(where: {
                        !$0.cancelled && $0.position <= point && point < $0.end
                    }) {
                        point = running.end
                        continue
                    }
                    let reached = startPartTransfers(at: point, end: hole.upperBound, hold: nil, owner: lookaheadOwner,
                                                     info: info, priority: priority, readClass: readClass, in: &state)
                    // No room under the limits, or a transfer further on.
                    guard reached > point else { break }
                    asked.append(point..<reached)
                    point = reached
                }
            }
        }
        statistics.probing.lookaheadFetches.add(Int64(asked.count), ordering: .relaxed)
        Log.debug("\(source.displayURL): \(container.rawValue): fetching ahead "
                  + (asked.isEmpty ? "nothing (present or on its way)"
                     : asked.map { "\($0.lowerBound)-\($0.upperBound - 1)" }.joined(separator: ", ")))
    }

    /// The last handle closed: the lookahead's transfers no read waits on stop.
    func stopLookahead(in state: inout LoaderState) {
        for (id, transfer) in state.fetches.transfers where transfer.owner == lookaheadOwner && !transfer.cancelled {
            if state.fetches.isWaitedOn(transfer.position..<max(transfer.position + 1, transfer.end)) { continue }
            state.fetches.stop(id)
            fetcher.cancel(id)
            Log.debug("stop GET \(source.displayURL) at byte \(transfer.position) (lookahead, no handle open)")
        }
    }
}
