// A read's transfers, acted on: what TransferPlan decides for its holes and
// the readahead past it (join, let a long one go on, or start), the room
// under the limits each takes, and the stops of those no read needs.
import Foundation
import MediaNetwork
import MediaStore
import MediaSupport

extension FileLoader {
    /// Makes sure a transfer is on its way for every byte of `holes`: joins
    /// running ones, starts the rest (reaching `window` further). Throws
    /// once a read has tried too often.
    /// `streams`: the reader reads on from where it was, so a transfer may
    /// be a long one, held at the window; a scan's reaches `piece` on.
    /// `account`: whose bytes the transfers started are (nil: the owner's).
    func requestHoles(in holes: [Range<Int64>], window: Int64, owner: ObjectIdentifier, readClass: ReadClass = .play,
                      streams: Bool = false, piece: Int64 = 0, account: ReaderAccount? = nil, info: ContentInfo,
                      attempts: inout Attempts, state: inout LoaderState) throws {
        let priority = readClass.readPriority
        for hole in holes {
            var point = hole.lowerBound
            while point < hole.upperBound {
                switch TransferPlan.step(at: point, of: hole, window: window, priority: priority,
                                         acceptsRanges: info.acceptsRanges, transfers: state.fetches.transfers,
                                         covers: { covers($0, $1, in: state) }) {
                case .join(let id, let promote, let letGoTo):
                    // A stream started ahead of this handle's first read
                    // is its own from here (FileLoader+Lookahead). Not a
                    // player's lookup's stream joined within the head: the
                    // demuxer reads its head, then jumps to its index, and
                    // that seek would stop the handle's (decision 0061).
                    if readClass == .play, let joined = state.fetches.transfers[id], joined.isLong,
                       joined.owner == lookaheadOwner, owner != lookaheadOwner,
                       joined.start != 0 || point >= settings.probeFirstBytes {
                        state.fetches.assign(id, to: owner, account: state.handles.accounts[owner])
                    }
                    if promote {
                        state.fetches.promote(id, to: priority)
                        fetcher.promote(id, to: priority)
                    }
                    if let letGoTo {
                        // A background read that lets a held stream go on
                        // takes those bytes of the day's, or fails.
                        if readClass == .background, let allowance = settings.backgroundDaily,
                           let limit = state.fetches.transfers[id]?.limit,
                           case let more = min(letGoTo, hole.upperBound) - limit, more > 0, !allowance.admits(more) {
                            throw backgroundRefusal(allowance, needs: more, owner: owner, in: state)
                        }
                        extendHold(id, to: letGoTo, mustReach: hole.upperBound, in: &state)
                    }
                    point = max(state.fetches.transfers[id]!.reach, point + 1)
                    continue
                case .followStream(let next):
                    point = next
                    continue
                case .start:
                    break
                }
                if readClass == .background, let allowance = settings.backgroundDaily,
                   !allowance.admits(hole.upperBound - point) {
                    throw backgroundRefusal(allowance, needs: hole.upperBound - point, owner: owner, in: state)
                }
                switch state.fetches.refusal(at: now(), believeMissingFor: settings.probeRetryAfter) {
                case .fail(let errno, let message)?: throw MediaError(errno, "\(source.displayURL): \(message)")
                case .wait?: return
                case nil: break
                }
                if attempts.stops != state.fetches.stops { attempts = Attempts(stops: state.fetches.stops) }
                if attempts.asked.contains(point..<point + 1) {
                    guard attempts.retries + 1 < settings.maxAttempts else {
                        state.fetches.unavailable(until: now() + settings.unavailableFor)
                        throw MediaError.io("\(source.displayURL): bytes \(point)-\(hole.upperBound - 1) unavailable: "
                                            + (state.fetches.lastError?.message ?? "transfer ended early"))
                    }
                    attempts.retries += 1
                    statistics.countRetry()
                }
                let start = point
                // A player that streams asks for the rest of the file once,
                // held until it reads on.
                let longEnd = ReadPattern.longTransferEnd(from: start, piece: piece, readClass: readClass,
                                                          container: state.lookahead.container, length: info.length)
                let (end, hold) = TransferPlan.started(at: start, of: hole, window: window, streams: streams,
                                                       holds: holdsTransfers(info), longEnd: longEnd)
                point = startPartTransfers(at: start, end: end, hold: hold, owner: owner, account: account, info: info,
                                           priority: priority, readClass: readClass, mustReach: hole.upperBound,
                                           in: &state)
                attempts.asked.insert(start..<point)
            }
        }
    }

    /// EIO for a background read past `--background-daily`, logged once
    /// per process and file (a job retries; its log would not end).
    private func backgroundRefusal(_ allowance: BackgroundAllowance, needs: Int64, owner: ObjectIdentifier,
                                   in state: borrowing LoaderState) -> MediaError {
        let account = state.handles.accounts[owner]
        let message = "background bytes of today used up (\(allowance.usedToday) fetched of --background-daily "
            + "\(allowance.bytesPerDay), the rest on its way or short of this read's \(needs)): only cached bytes are "
            + "served to background jobs until tomorrow (UTC)"
        if account?.firstRefusal() ?? false {
            Log.info("\(account!.process.name) (pid \(account!.process.pid)) reading \(source.displayURL): \(message)")
        }
        return MediaError(EIO, "\(source.displayURL): \(message)", logged: true)
    }

    /// Keeps at least half a window of bytes present or on their way past
    /// `offset`, topping up a whole window at a time so transfers stay large.
    /// A scan's readahead (a one-frame extraction's) is a scan's bytes, in
    /// its budget, at a scan's place in the network's queue.
    func readAhead(from offset: Int64, window: Int64, owner: ObjectIdentifier, readClass: ReadClass, streams: Bool,
                   info: ContentInfo, in state: inout LoaderState) {
        // Bytes read ahead while the cache cannot be written would be lost;
        // a background job past its day's bytes gets only what is cached.
        guard window > 0, offset < info.length, statistics.cacheWritable, info.acceptsRanges,
              readClass != .background || settings.backgroundDaily?.exhausted != true else { return }
        // A long transfer of this stream (its hold at or past the read,
        // within a window) is let go on to a window past the read, in steps
        // of a quarter window, at most 256 KiB: one message to the network
        // thread, not one per read, and small, so a player reading at its
        // bitrate keeps it held for a second or two, not for the hold's limit.
        if let (id, long) = TransferPlan.stream(at: offset, window: window, transfers: state.fetches.transfers) {
            if offset + window - long.reach >= min(window / 4, Self.holdStep) {
                // With nothing cached, ahead as far as memory keeps bytes
                // for the next reads (PassingBytes), so they find them there.
                // Not a background job's: its stream goes no further than
                // it reads past the day's bytes (extendHold).
                let passing = readClass != .background && budget?.passesThrough == true
                    ? offset + Int64(PassingBytes.capacity / 2) : 0
                extendHold(id, to: offset + window, mustReach: passing, in: &state)
            }
            return
        }
        // A long transfer near is let go on to this window. The loader's
        // own fetch of the first bytes (a lookup's, an archive member's
        // head) is no sign that the reader goes past it: a demuxer reads
        // its head, then seeks. Its first read past there asks, sized to
        // the link by then. Read ahead from inside it, a mkv's seek sent
        // one long transfer more, stopped.
        let walk = TransferPlan.lead(
            from: offset, length: info.length, within: window / 2,
            presentEnd: { state.bytes.present.presentEnd(from: $0) }, transfers: state.fetches.transfers,
            brings: { TransferPlan.brings($0, $1, covers: { covers($0, $1, in: state) }) },
            endsAt: { $0.isLong || $0.owner == ObjectIdentifier(self) && $0.start == 0 })
        let lead: Int64
        switch walk {
        case .enough: return
        case .transfer(let id):
            if state.fetches.transfers[id]?.isLong == true {
                extendHold(id, to: offset + window, mustReach: 0, in: &state)
            }
            return
        case .open(let point): lead = point
        }
        // A scan that reads on has its long transfer's hold let go on above,
        // never a next one ahead: the server fills the sockets' buffers past
        // a hold, so a next one asked early sends megabytes the scan may stop
        // short of. Its next miss asks for it, a round trip every 8 MiB
        // (decision 0014).
        if !readClass.plays && streams { return }
        // Only a player's readahead is a long transfer: a scan that
        // streams returned above, and a thumbnail's runs are short.
        let long = readClass == .play && holdsTransfers(info)
        _ = startPartTransfers(at: lead, end: long ? info.length : lead + window, hold: long ? lead + window : nil,
                               owner: owner, info: info, priority: readClass.aheadPriority,
                               readClass: readClass, in: &state)
    }

    /// Whether transfers of this file may be long ones, held by the
    /// fetcher until their reader reads on (FetchRequest.allowance): not
    /// for a server without ranges, whose every answer is the whole body.
    func holdsTransfers(_ info: ContentInfo) -> Bool {
        info.acceptsRanges && fetcher.holdsTransfers(of: source.url)
    }

    /// Lets a long transfer go on to `wanted` (up to its end), within the
    /// room under the cache limits, and at least to `mustReach`, which a
    /// read waits on.
    func extendHold(_ id: TransferID, to wanted: Int64, mustReach: Int64, in state: inout LoaderState) {
        guard let transfer = state.fetches.transfers[id], !transfer.cancelled, let limit = transfer.limit else { return }
        var target = min(wanted, transfer.end)
        guard target > limit else { return }
        // A background stream goes on past the day's bytes only as far as
        // a read waits (requestHoles admitted it); its extension counts now.
        let allowance = transfer.readClass == .background ? settings.backgroundDaily : nil
        if let allowance, !allowance.admits(target - limit) {
            target = min(target, mustReach)
            guard target > limit else { return }
        }
        if let budget {
            let more = budget.reserve(upTo: target - limit, for: transfer.readClass)
            state.fetches.reserve(more, for: id)
            target = max(limit + more, min(target, mustReach))
            guard target > limit else { return }
        }
        if let allowance {
            allowance.commit(target - limit)
            state.fetches.commit(target - limit, for: id)
        }
        state.fetches.hold(id, at: target)
        fetcher.allow(id, through: target - transfer.start)
    }

    /// Whether a running transfer will soon write `point`.
    func covers(_ transfer: Transfer, _ point: Int64, in state: borrowing LoaderState) -> Bool {
        state.covers(transfer, point, joinDistance: settings.joinDistance)
    }

    /// Stops the transfers a handle started that no read waits on, unless
    /// `offset` will soon be reached by one or it is nearly done (another
    /// handle's read of those bytes would fetch them a second time).
    func cancelTransfers(of owner: ObjectIdentifier, except offset: Int64?, in state: inout LoaderState) {
        guard state.fetches.transfers.values.contains(where: { $0.owner == owner && !$0.cancelled }) else { return }
        let inFlight = bytesInFlight
        for (id, transfer) in state.fetches.transfers where transfer.owner == owner && !transfer.cancelled {
            if let offset, covers(transfer, offset, in: state) { continue }
            if transfer.isNearlyDone(inFlight: inFlight) { continue }
            stop(id, transfer, unlessWaitedOn: transfer.position..<max(transfer.position, transfer.reach),
                 why: "was to reach \(transfer.end)", in: &state)
        }
    }

    /// What the server has sent already when a stop reaches it: one round
    /// trip of the link, at least `cancelTolerance`.
    var bytesInFlight: Int64 { max(settings.cancelTolerance, settings.link?.bytesPerRoundTrip(to: source.url) ?? 0) }

    /// Stops a transfer unless a read waits on bytes of `waited`.
    func stop(_ id: TransferID, _ transfer: LoaderState.Transfer, unlessWaitedOn waited: Range<Int64>, why: String,
              in state: inout LoaderState) {
        if state.fetches.isWaitedOn(waited) { return }
        state.fetches.stop(id)
        fetcher.cancel(id)
        Log.debug("stop GET \(source.displayURL) at byte \(transfer.position) (\(why))")
    }

    /// Starts a transfer at `start` reaching toward `end`, but never into
    /// present bytes or a running transfer, nor (past `mustReach`, the
    /// bytes a read waits for) beyond the room under the cache limits.
    /// `hold`: a long transfer, to `wantedEnd` but held there for now
    /// (nil: one that runs to its end). `account`: the reader its bytes
    /// count for, when not the owner (nil: the owner's, if a handle).
    /// Returns where the transfer stops for now (`start`: none started).
    @discardableResult
    func startTransfer(at start: Int64, end wantedEnd: Int64, hold: Int64? = nil, owner: ObjectIdentifier,
                       account: ReaderAccount? = nil, info: ContentInfo, priority: FetchRequest.Priority = .read,
                       readClass: ReadClass = .play, mustReach: Int64 = 0, in state: inout LoaderState) -> Int64 {
        var end = min(wantedEnd, info.length)
        if info.length - end <= settings.tailStretch { end = info.length }
        if let next = state.bytes.present.nextPresent(atOrAfter: start) { end = min(end, next) }
        for transfer in state.fetches.transfers.values where !transfer.cancelled && transfer.position > start {
            end = min(end, transfer.position)
        }
        var limit = hold.map { min(max($0, start), end) }
        if limit == end { limit = nil }
        // Under --background-daily a background transfer asks the server
        // for no more than it counts against the day: a held stream's range
        // runs on, and the server sends into the sockets what no read takes.
        if readClass == .background, let allowance = settings.backgroundDaily {
            if let held = limit {
                end = held
                limit = nil
            }
            // Past what the day has left, only the bytes a read waits on
            // (requestHoles admitted them): readahead stops at the cap.
            end = max(min(end, start.addingSaturating(allowance.room)), min(end, mustReach))
            guard end > start else { return start }
        }
        // Room under the cache limits: a read fetches its bytes whatever
        // (those that do not fit pass uncached); readahead and preload
        // fetch only what will be kept.
        let reserved = budget?.reserve(upTo: (limit ?? end) - start, for: readClass) ?? 0
        if budget != nil {
            if let wanted = limit {
                limit = max(start + reserved, min(wanted, mustReach))
                guard limit! > start else { return start }
            } else {
                end = max(start + reserved, min(end, mustReach))
                guard end > start else { return start }
            }
        }
        // A long transfer that would run on into these bytes stops where
        // they begin: they are fetched once.
        for (id, transfer) in state.fetches.transfers
        where !transfer.cancelled && transfer.limit != nil && transfer.position <= start && start < transfer.end {
            state.fetches.cut(id, at: start)
        }
        // The validators of now, under the lock the transfer is recorded
        // under: its answer is judged against the same version.
        let current = state.version.info ?? info
        let validator = current.etag.flatMap { $0.hasPrefix("W/") ? nil : $0 } ?? current.lastModified
        var request = FetchRequest(url: source.url, range: start..<end, ifRange: validator, priority: priority)
        request.allowance = limit.map { $0 - start }
        let id = fetcher.start(request, delegate: self)
        countTransferStarted()
        // A background transfer's bytes count against the day from now
        // (BackgroundAllowance): jobs reading at once cannot pass it together.
        var committed: Int64 = 0
        if readClass == .background, let allowance = settings.backgroundDaily {
            committed = (limit ?? end) - start
            allowance.commit(committed)
        }
        state.fetches.add(id, Transfer(end: end, position: start, owner: owner, priority: priority, reserved: reserved,
                                       askedAt: now(), ifRange: validator != nil, readClass: readClass,
                                       limit: limit, start: start, account: account ?? state.handles.accounts[owner],
                                       committed: committed))
        if let limit {
            Log.debug("GET \(source.displayURL) bytes \(start)-\(end - 1), held at \(limit)")
        } else {
            Log.debug("GET \(source.displayURL) bytes \(start)-\(end - 1)")
        }
        return limit ?? end
    }

    /// A transfer started: one more request, one more in flight.
    func countTransferStarted() {
        statistics.requests.add(1, ordering: .relaxed)
        statistics.transfersInFlight.add(1, ordering: .relaxed)
    }
}
