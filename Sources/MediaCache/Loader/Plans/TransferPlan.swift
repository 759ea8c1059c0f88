// "Join a transfer in flight, or start one": the one decision a read makes
// at each point of its holes, and readahead's at its lead, pure over the
// transfers running and the settings, so each can be tested as a table
// (TransferPlanTests). The loader acts on the step (FileLoader+Planning):
// it joins, lets a long transfer go on, or starts one where the plan says.
// Whether the server may be asked at all is TransferBook.refusal's rule.
import MediaNetwork

enum TransferPlan {
    typealias Transfer = LoaderState.Transfer

    /// What a read does at a point of its hole.
    enum Step: Equatable {
        /// A running transfer will soon write the point (`LoaderState.covers`):
        /// the read waits on it. `promote`: it runs at a later place than
        /// the read's (a scan's read lifts a preload to a scan's place,
        /// never a transfer to a player's); `letGoTo`: it is a long one,
        /// let go on at least to the end of the hole, or a window past
        /// the point.
        case join(TransferID, promote: Bool, letGoTo: Int64?)
        /// A server without ranges sends the whole body to every request:
        /// one stream at a time, which every reader joins. `next`: where
        /// the read looks next.
        case followStream(next: Int64)
        /// Nothing brings the point: a transfer starts there.
        case start
    }

    /// The step at `point` of `hole`. `covers`: whether a transfer will
    /// soon write a point (the loader's `joinDistance`).
    static func step(at point: Int64, of hole: Range<Int64>, window: Int64, priority: FetchRequest.Priority,
                     acceptsRanges: Bool, transfers: [TransferID: Transfer],
                     covers: (Transfer, Int64) -> Bool) -> Step {
        if let (id, covering) = transfers.first(where: { covers($0.value, point) }) {
            return .join(id, promote: covering.priority > priority,
                         letGoTo: covering.limit == nil ? nil : max(hole.upperBound, point + window))
        }
        if !acceptsRanges, let (_, stream) = transfers.first(where: { !$0.value.cancelled }) {
            return .followStream(next: max(hole.upperBound, min(stream.end, hole.upperBound)))
        }
        return .start
    }

    /// Where a read's transfer started at `point` ends and is held: to
    /// `reach` (the hole's end, or a window on), or, for a player that
    /// streams from a server whose transfers may be held (`holds`), to
    /// `longEnd` held at `reach` until it reads on.
    static func started(at point: Int64, of hole: Range<Int64>, window: Int64, streams: Bool, holds: Bool,
                        longEnd: Int64) -> (end: Int64, hold: Int64?) {
        let reach = max(hole.upperBound, point + window)
        let long = window > 0 && streams && holds
        return long ? (longEnd, reach) : (reach, nil)
    }

    /// Readahead's question at its lead, a looser one than a read's: is a
    /// transfer bringing `lead` at all, however far behind it runs? A read
    /// must have its bytes soon, so it joins only what `covers`; readahead
    /// only keeps bytes on their way, so any transfer whose range holds
    /// the lead will do. Except a long one: it runs to the file's end, and
    /// brings a lead only when its position or hold is near (`covers`).
    /// One far behind is not let go on to a seek past it: the seek's bytes
    /// would wait behind every byte between (decision 0014).
    static func bringing(_ lead: Int64, transfers: [TransferID: Transfer],
                         covers: (Transfer, Int64) -> Bool) -> (id: TransferID, transfer: Transfer)? {
        transfers.first(where: { brings($0.value, lead, covers: covers) }).map { ($0.key, $0.value) }
    }

    /// `bringing`'s test of one transfer.
    static func brings(_ transfer: Transfer, _ lead: Int64, covers: (Transfer, Int64) -> Bool) -> Bool {
        holds(transfer, lead) && (!transfer.isLong || covers(transfer, lead))
    }

    /// Whether a running transfer's range holds `point`, however far
    /// behind it runs.
    static func holds(_ transfer: Transfer, _ point: Int64) -> Bool {
        !transfer.cancelled && transfer.position <= point && point < transfer.end
    }

    /// Where readahead's walk from `offset` ends.
    enum Lead: Equatable {
        /// Nothing holds or brings the point: a transfer may start there.
        case open(Int64)
        /// Bytes present or on their way reach `within` past the offset,
        /// or the file's end: nothing to start (for readahead, enough
        /// ahead; for the stream ahead, a lead too far to be the read's).
        case enough
        /// The walk came to a transfer it may not walk past (`endsAt`).
        case transfer(TransferID)
    }

    /// The walk from `offset` past the bytes present (`presentEnd`: where
    /// the present run from a point ends) and those a transfer brings
    /// (`brings`, the first such), to the first point neither holds.
    /// Readahead's (`bringing`, ending at a long transfer or the lookup's
    /// head) and the stream ahead's (any transfer whose range holds the
    /// point, ending at a long one) differ only in the two tests.
    static func lead(from offset: Int64, length: Int64, within: Int64, presentEnd: (Int64) -> Int64,
                     transfers: [TransferID: Transfer], brings: (Transfer, Int64) -> Bool,
                     endsAt: (Transfer) -> Bool) -> Lead {
        var lead = offset
        while lead < length {
            let end = presentEnd(lead)
            if end > lead {
                lead = end
            } else if let (id, running) = transfers.first(where: { brings($0.value, lead) }) {
                if endsAt(running) { return .transfer(id) }
                lead = running.end
            } else {
                return .open(lead)
            }
            if lead - offset >= within { return .enough }
        }
        return .enough
    }

    /// The long transfer of a stream whose reader is at `offset`: its hold
    /// at or past the read, its position within a window of it.
    static func stream(at offset: Int64, window: Int64,
                       transfers: [TransferID: Transfer]) -> (id: TransferID, transfer: Transfer)? {
        transfers.first(where: { (_, transfer) in
            !transfer.cancelled && transfer.isLong && transfer.reach >= offset && transfer.position <= offset + window
        }).map { ($0.key, $0.value) }
    }
}
