// The container lookahead's fetches (ContainerLookahead): what the demuxer
// will read next, asked for as soon as the head has told where it is. They
// are the loader's own transfers, not a handle's (a handle's seek stops
// its own, and the demuxer's next read is such a seek), at readahead's
// place in the network's queue (a scan's for a scan's file), so they never
// go ahead of a read that waits; they fetch only what fits under the cache
// limits, and stop when the file's last handle closes.
import MediaNetwork
import MediaStore
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
                    // A long transfer brings only what is near its hold (a
                    // player's stream from its first read runs to the end).
                    if let (_, running) = TransferPlan.bringing(point, transfers: state.fetches.transfers,
                                                                covers: { covers($0, $1, in: state) }) {
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

    /// A player reading from the start of a file: it reads on from
    /// there (a player, a transcode, `cat`), after at most a detour to the
    /// container's index, which the lookahead fetches. Its stream starts
    /// now, past the bytes present or on their way (the lookup's head), as
    /// one long transfer held a window on, not when its reads reach the
    /// head's end: that was a request of its own, a round trip or more
    /// after the head (a slow-started connection's five), with the link
    /// idle between (issue 55, decision 0056). The lookahead's, so the
    /// demuxer's seek to its index does not stop it; the handle's from the
    /// read that joins it (requestHoles); stopped by a player's seek to
    /// bytes nothing brings (`stopStreamAhead`). Only over a far link (a
    /// round trip of 10 ms or more, known from the lookup's answer): near,
    /// a request costs little and the kernel's readahead hides it. Only
    /// while the head is on its way (`waited`: the read waited for bytes;
    /// or any transfer of the file still runs): a read of cached bytes
    /// sends nothing (a preloaded head, a file read before). On a fast far
    /// link the head's 512 KiB may be present by the first read while its
    /// transfer is still being taken.
    /// Only a read the kernel made large (`looksSequential`, 32 KiB or
    /// more: its readahead for a reader of 32 KiB pieces, as a demuxer's,
    /// is 64 KiB): a program reading a few KiB of the head and stopping
    /// (`head -c 4096`: 16 KiB) would leave a stream whose server filled
    /// the sockets' buffers, 4.4 MB on the bench's WAN link.
    /// Not only the first read: a handle that has read on from byte 0
    /// without a jump starts it at its first read that finds the link far,
    /// or, when the first read found it unknown (a listed file's first
    /// read is the link's first answer), when the head's answer tells it
    /// (`Transfer.streamOnAnswer`, decision 0058). Once: a stream present
    /// or on its way past the read is found by the walk below.
    /// A scan's first read starts nothing: a probe stops soon. Nor a
    /// player's whose process asked to start elsewhere (`ffmpeg -ss 40
    /// -i`, `pattern.startsElsewhere`): it reads the head and the index,
    /// then seeks; the stream would be stopped by that seek, a request
    /// and the 4-5 MB its server sent until then spent (decision 0059).
    func startStreamAhead(after read: Range<Int64>, waited: Bool, pattern: ReadPattern, info: ContentInfo,
                          in state: inout LoaderState) {
        guard pattern.readClass == .play, pattern.readsAhead, !pattern.startsElsewhere, pattern.firstStreakStart == 0,
              pattern.looksSequential, streamsAhead(info),
              waited || state.fetches.transfers.values.contains(where: { !$0.cancelled }) else { return }
        // Past the head a lookup brings, and anything else on its way; a
        // long transfer there is another handle's stream, or this file's
        // already. A stream further on than a window past the head is not
        // this read's next bytes (`within` is exclusive: one past the
        // bound).
        let walk = TransferPlan.lead(
            from: read.upperBound, length: info.length, within: Self.streamAheadWithin + 1,
            presentEnd: { state.bytes.present.presentEnd(from: $0) }, transfers: state.fetches.transfers,
            brings: TransferPlan.holds, endsAt: \.isLong)
        guard case .open(let lead) = walk else {
            // A player's lookup's stream (`adoptProbe`): its bytes are this
            // reader's from here.
            if case .transfer(let id) = walk, let stream = state.fetches.transfers[id],
               stream.owner == lookaheadOwner, stream.account == nil {
                state.fetches.assign(id, to: lookaheadOwner, account: state.handles.accounts[ObjectIdentifier(pattern)])
            }
            return
        }
        let window = max(pattern.fetchWindow(bytesPerRoundTrip: settings.link?.bytesPerRoundTrip(to: source.url) ?? 0),
                         ReadPattern.linkStart)
        // Its bytes are the reader's, as those of a stream it started itself.
        let reached = startPartTransfers(at: lead, end: info.length, hold: lead + window, owner: lookaheadOwner,
                                         account: state.handles.accounts[ObjectIdentifier(pattern)], info: info,
                                         priority: ReadClass.play.aheadPriority, readClass: .play, in: &state)
        if reached > lead { statistics.probing.streamsAhead.add(1, ordering: .relaxed) }
    }

    /// A stream would start at most this far past the first read (past the
    /// head a lookup brings); further on, it is not that read's next bytes.
    static let streamAheadWithin: Int64 = 1 << 20

    /// Whether a player's stream may run ahead of its reads, whether
    /// started at its first read (`startStreamAhead`) or kept from its
    /// lookup (`adoptProbe`, decision 0061): only over a far link, for a
    /// file that holds transfers, whose bytes the cache keeps.
    func streamsAhead(_ info: ContentInfo) -> Bool {
        holdsTransfers(info) && statistics.cacheWritable && budget?.passesThrough != true
            && settings.link?.isFar(to: source.url) == true
    }

    /// A player's lookup's stream no open has taken within
    /// `unclaimedStreamLife` of its asking: its process only looked (a
    /// player's stat of a file it does not play). Stopped at the
    /// flusher's pass; with a handle open, the last close stops it
    /// (`stopLookahead`), so one held with none open is such a stream.
    func stopUnclaimedStream(in state: inout LoaderState) {
        guard state.handles.openHandles == 0 else { return }
        let now = self.now()
        for (id, transfer) in state.fetches.transfers where transfer.owner == lookaheadOwner && transfer.isLong
            && !transfer.cancelled && now - (transfer.askedAt ?? now) >= Self.unclaimedStreamLife {
            stop(id, transfer, unlessWaitedOn: transfer.position..<max(transfer.position + 1, transfer.reach),
                 why: "a player's lookup, no open came", in: &state)
        }
    }

    /// A player opens what it looked up within milliseconds.
    static let unclaimedStreamLife: Double = 2

    /// A player jumped to `point`: a stream started ahead of a first read
    /// that no read has joined stops, unless the point is present or on its
    /// way (the demuxer's detour to its index, which the lookahead brings):
    /// a seek past the head needs other bytes, and those of the stream
    /// would share the link with them.
    func stopStreamAhead(unlessBringing point: Int64, in state: inout LoaderState) {
        guard state.fetches.transfers.values.contains(where: { $0.owner == lookaheadOwner && $0.isLong && !$0.cancelled }),
              !state.bytes.present.contains(point..<point + 1),
              TransferPlan.bringing(point, transfers: state.fetches.transfers,
                                    covers: { covers($0, $1, in: state) }) == nil
        else { return }
        for (id, transfer) in state.fetches.transfers where transfer.owner == lookaheadOwner && transfer.isLong
            && !transfer.cancelled {
            stop(id, transfer, unlessWaitedOn: transfer.position..<max(transfer.position + 1, transfer.reach),
                 why: "a stream ahead, the player sought \(point)", in: &state)
        }
    }

    /// The last handle closed: the lookahead's transfers no read waits on stop.
    /// One nearly done is let end, as a handle's (`cancelTransfers`): its
    /// bytes are sent already, and a stop tears its connection down (an FTP
    /// server counts it until it closes: a fourth is refused, 421).
    func stopLookahead(in state: inout LoaderState) {
        let inFlight = bytesInFlight
        for (id, transfer) in state.fetches.transfers where transfer.owner == lookaheadOwner && !transfer.cancelled
            && !transfer.isNearlyDone(inFlight: inFlight) {
            stop(id, transfer, unlessWaitedOn: transfer.position..<max(transfer.position + 1, transfer.end),
                 why: "lookahead, no handle open", in: &state)
        }
    }
}
