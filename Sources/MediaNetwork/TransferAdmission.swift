// Which waiting transfers may start, counted per origin (scheme, host,
// port): at most `perOrigin` run on each. An origin's free places go to its
// waiting reads one requester (file) after another, round-robin, a requester
// with nothing running there first; probes, then readahead, a library
// scan's reads and preload, get only what reads leave (probes, readahead
// and preload under caps of their own for the whole mount; a scan's reads,
// which someone waits on, only under the origin's).
// An origin that answered over HTTP/2 multiplexes: its transfers are
// streams of one connection, not connections, so it takes
// `perMultiplexedOrigin` at once (a VOD's 60 length probes in one round
// trip, not eight), and its readahead and preload count against a cap of
// their own (`maxMultiplexedBackground`: a walk's 16 part heads ahead in
// one round trip, not four a round); an HTTP/1 answer takes that back.
// Bookkeeping only, on the network thread: O(1) amortized per transfer, no
// scan of what waits. One origin's queue never holds another origin's back.
import MediaSupport

package final class TransferAdmission {
    public typealias Priority = FetchRequest.Priority

    /// How many transfers may run at once, and where: fixed at mount.
    package struct Places: Sendable {
        /// Transfers running at once per origin.
        package let perOrigin: Int
        /// Transfers running at once per origin that multiplexes (HTTP/2 streams).
        package let perMultiplexedOrigin: Int
        /// Places per origin that probes and background transfers leave to reads.
        package let readReserve: Int
        /// Probes running at once, all origins together.
        package let maxProbes: Int
        /// Readahead and preload transfers running at once, all origins together.
        package let maxBackground: Int
        /// The same at origins that multiplex (streams, not connections; each
        /// still holds a receive buffer, so they are bounded too).
        package let maxMultiplexedBackground: Int
    }

    package let places: Places
    package var perOrigin: Int { places.perOrigin }
    package var perMultiplexedOrigin: Int { places.perMultiplexedOrigin }
    package var readReserve: Int { places.readReserve }
    package var maxProbes: Int { places.maxProbes }
    package var maxBackground: Int { places.maxBackground }
    package var maxMultiplexedBackground: Int { places.maxMultiplexedBackground }

    private struct Entry {
        let origin: HTTPOrigin?
        let group: String
        var priority: Priority
        var running = false
        /// Counted in `runningMultiplexedBackground` while it runs.
        var multiplexedBackground = false
        /// The admission pass after which it was asked for, whether
        /// players' transfers ran or waited at its origin then, and how
        /// many of theirs had started there: a scan read that waits while
        /// they run or start was delayed by playback.
        var askedAfter = 0
        var behindPlayback = false
        var playStartsAtAsk = 0
        /// When it was asked for (the fetcher's monotonic time).
        var askedAt: Double = 0
    }

    /// One requester's transfers at one origin.
    private final class Group {
        /// Its waiting reads, oldest first; cancelled or promoted ids are skipped.
        var reads = FIFO<TransferID>()
        var waitingReads = 0
        var running = 0
        /// In its origin's `fresh` or `turns`.
        var queued = false
        var idle: Bool { running == 0 && waitingReads == 0 && !queued }
    }

    private final class Origin {
        /// Its transfers are streams of one connection (HTTP/2).
        var multiplexed = false
        /// Transfers it runs at most whatever the places say (FTP's few).
        var cap = Int.max
        var running = 0
        /// Players' reads and readahead running here, and started here so far.
        var runningPlay = 0
        var playStarts = 0
        var groups: [String: Group] = [:]
        /// Requesters whose reads began waiting while nothing of theirs ran
        /// here: served before `turns`, so a file that has nothing waits for
        /// the next free place, not for a turn of every other file.
        var fresh = FIFO<String>()
        var turns = FIFO<String>()
        var waitingReads = 0
        /// Waiting probes, readahead and preload by priority (index 0, reads, unused).
        var background = [FIFO<TransferID>](repeating: FIFO(), count: Priority.allCases.count)
        var waitingBackground = [Int](repeating: 0, count: Priority.allCases.count)
        /// In the admission's `rings[priority]`.
        var inRing = [Bool](repeating: false, count: Priority.allCases.count)
        /// In the admission's `dirty`.
        var dirty = false

        var idle: Bool {
            running == 0 && waitingReads == 0 && groups.isEmpty && !dirty
                && !inRing.contains(true) && !waitingBackground.contains { $0 > 0 }
        }
    }

    private static let backgroundPriorities: [Priority] = [.probe, .readahead, .scan, .preload, .background]

    private var entries: [TransferID: Entry] = [:]
    private var origins: [HTTPOrigin?: Origin] = [:]
    /// Origins whose transfers changed since the last `admit`: places freed or reads added.
    private var dirty = FIFO<HTTPOrigin?>()
    /// Per background priority, origins with such transfers waiting, taken
    /// in turn while the cap allows. An origin without room leaves its ring
    /// and comes back when it is dirty again, so a pass costs what it admits.
    private var rings = [FIFO<HTTPOrigin?>](repeating: FIFO(), count: Priority.allCases.count)
    private var runningByPriority = [Int](repeating: 0, count: Priority.allCases.count)
    /// Readahead and preload running at multiplexing origins (not in the
    /// readahead and preload counts of `runningByPriority`).
    private var runningMultiplexedBackground = 0
    /// Readahead transfers waiting, all origins together.
    private var waitingReadahead = 0
    /// Passes of `admit` so far: a transfer started in the first pass after
    /// it was asked for did not wait.
    private var passes = 0
    /// Scan reads that waited for a place while players' reads or readahead
    /// ran or waited at their origin, since the caller last took the count.
    package var scansDelayed = 0
    /// Whether a player's transfer (a read, or its readahead) moves bytes
    /// now, anywhere: a background job's transfer does not start then. Set
    /// by the fetcher before each `admit`; it knows which transfers are
    /// held. Pausing one already running does not free the link at once
    /// (its server fills the sockets' buffers): not starting it does.
    package var playMoving = false
    /// The fetcher's monotonic time, set before each `enqueue` and `admit`.
    package var now: Double = 0
    /// How long a background job's transfer gives way to players at a
    /// stretch (`backgroundPatience(readTimeout:)`): asked for that long
    /// ago, it starts though a player's transfer moves; paused that long
    /// for a player's reads (`jobPauses`), it moves for a turn
    /// (`jobTurn`). Beside a player that reads flat out (a copy, a
    /// transcode) a job is slow; its reads do not fail at the read timeout
    /// for waiting. Beside one that plays in real time, whose reads come
    /// and go, it moves in their gaps, as before.
    package var backgroundPatience: Double = TransferAdmission.backgroundPatience(readTimeout: 30)

    /// A third of the read timeout, the rest left to the transfer itself;
    /// at most 5 s: a player's start (issue 54's half a second) is long
    /// over by then.
    package static func backgroundPatience(readTimeout: Double) -> Double { min(5, readTimeout / 3) }

    /// How long a job's transfer that gave way its patience out moves
    /// before it gives way again: its reader's waiting read, and a few
    /// after it, are served.
    package static let jobTurn: Double = 1

    /// A job's transfer's giving way to players' reads: since when it has
    /// stood still for them, and until when its turn to move runs.
    package struct JobWait: Sendable, Equatable {
        package var stalledSince: Double?
        package var turnUntil: Double = 0
        package init(stalledSince: Double?) { self.stalledSince = stalledSince }
    }

    /// Whether a running job's transfer pauses now, players' reads moving
    /// bytes or not (`reading`): for at most its patience at a stretch,
    /// then not for a turn. Its wait before it started counts in the
    /// first stretch (`JobWait(stalledSince: askedAt)`).
    package func jobPauses(_ wait: inout JobWait, reading: Bool) -> Bool {
        guard reading else {
            wait.stalledSince = nil
            return false
        }
        if now < wait.turnUntil { return false }
        let since = wait.stalledSince ?? now
        guard now - since < backgroundPatience else {
            wait.turnUntil = now + Self.jobTurn
            wait.stalledSince = nil
            return false
        }
        wait.stalledSince = since
        return true
    }

    /// Whether a waiting job's transfer asked for at `askedAt` still
    /// waits for players' transfers to stop moving before it starts.
    package func waitsForPlayers(askedAt: Double) -> Bool { now - askedAt < backgroundPatience }
    /// Origins whose last answer came over HTTP/2; kept while they are idle
    /// (an idle origin's entry is dropped), bounded by forgetting them all.
    private var multiplexing = Set<HTTPOrigin?>()
    static let maxMultiplexingOrigins = 4096

    package init(perOrigin: Int, readReserve: Int, maxProbes: Int, maxBackground: Int,
                perMultiplexedOrigin: Int? = nil, maxMultiplexedBackground: Int? = nil) {
        places = Places(perOrigin: perOrigin, perMultiplexedOrigin: max(perMultiplexedOrigin ?? perOrigin, perOrigin),
                        readReserve: readReserve, maxProbes: maxProbes, maxBackground: maxBackground,
                        maxMultiplexedBackground: max(maxMultiplexedBackground ?? maxBackground, maxBackground))
    }

    /// Origins with a transfer running or waiting (the rest are forgotten).
    package var originCount: Int { origins.count }

    /// Whether `key`'s last answer came over a multiplexing protocol.
    package func multiplexes(_ key: HTTPOrigin?) -> Bool { multiplexing.contains(key) }

    /// An answer from `key` came over HTTP/2 (`multiplexes`) or HTTP/1:
    /// its place count follows the newest answer.
    package func learned(_ key: HTTPOrigin?, multiplexes: Bool) {
        guard key != nil, multiplexes != multiplexing.contains(key) else { return }
        if multiplexes {
            if multiplexing.count >= Self.maxMultiplexingOrigins { multiplexing = [] }
            multiplexing.insert(key)
        } else {
            multiplexing.remove(key)
        }
        guard let origin = origins[key] else { return }
        origin.multiplexed = multiplexes
        markDirty(key, origin)
    }

    /// Transfers that may run at once at `origin`.
    private func places(_ origin: Origin) -> Int {
        min(origin.multiplexed ? perMultiplexedOrigin : perOrigin, origin.cap)
    }

    /// FTP servers refuse a user's fourth connection ("421 too many
    /// connections") as a rule: an FTP origin runs at most this many.
    package static let maxFTPConnections = 3

    static func cap(of key: HTTPOrigin?) -> Int {
        key.map { $0.scheme == "ftp" || $0.scheme == "ftps" } == true ? maxFTPConnections : Int.max
    }

    package func enqueue(_ id: TransferID, origin key: HTTPOrigin?, group: String, priority: Priority) {
        let origin = origins[key] ?? {
            let made = Origin()
            made.multiplexed = multiplexing.contains(key)
            made.cap = Self.cap(of: key)
            origins[key] = made
            return made
        }()
        entries[id] = Entry(origin: key, group: group, priority: priority, askedAfter: passes,
                            behindPlayback: priority == .scan && (origin.waitingReads > 0 || origin.runningPlay > 0
                                || origin.waitingBackground[Priority.readahead.rawValue] > 0),
                            playStartsAtAsk: origin.playStarts, askedAt: now)
        if priority == .read {
            addRead(id, group: group, at: origin)
        } else {
            origin.background[priority.rawValue].append(id)
            countWaiting(origin, priority.rawValue, 1)
        }
        markDirty(key, origin)
    }

    /// A reader waits on the transfer now: a waiting one joins its
    /// requester's reads (behind them), a running one stops counting
    /// against its background cap. `priority`: the reader's (a scan's
    /// reader lifts a preload only to a scan's place).
    package func promote(_ id: TransferID, to priority: Priority = .read) {
        guard var entry = entries[id], priority < entry.priority, let origin = origins[entry.origin] else { return }
        let was = entry.priority.rawValue
        entry.priority = priority
        entries[id] = entry
        if entry.running {
            uncount(&entry, was)
            entries[id] = entry
            count(&entry, priority.rawValue, at: origin)
            entries[id] = entry
            if Self.isPlay(priority) && !Self.isPlay(FetchRequest.Priority(rawValue: was)!) { origin.runningPlay += 1 }
        } else {
            countWaiting(origin, was, -1)
            compactBackground(origin, was)
            if priority == .read {
                addRead(id, group: entry.group, at: origin)
            } else {
                origin.background[priority.rawValue].append(id)
                countWaiting(origin, priority.rawValue, 1)
            }
        }
        markDirty(entry.origin, origin)
    }

    /// The transfer ended, or was cancelled while waiting.
    package func remove(_ id: TransferID) {
        guard let entry = entries.removeValue(forKey: id), let origin = origins[entry.origin] else { return }
        // A dictionary keeps its capacity: one that held a listing's
        // 100,000 probes would hold megabytes for nothing after.
        if entries.isEmpty { entries = [:] }
        let p = entry.priority.rawValue
        let group = origin.groups[entry.group]
        if entry.running {
            origin.running -= 1
            group?.running -= 1
            var entry = entry
            uncount(&entry, p)
            if Self.isPlay(entry.priority) { origin.runningPlay -= 1 }
        } else if entry.priority == .read {
            origin.waitingReads -= 1
            if let group {
                group.waitingReads -= 1
                if group.reads.count > 2 * group.waitingReads + 64 {
                    group.reads.removeAll { !isWaiting($0, as: .read) }
                }
            }
        } else {
            countWaiting(origin, p, -1)
            compactBackground(origin, p)
        }
        if let group, group.idle { origin.groups[entry.group] = nil }
        markDirty(entry.origin, origin)
    }

    /// Whether a transfer of `priority` running at `key` takes a place
    /// that a read there waits for (every place taken), or, being a read
    /// or readahead, one a player's readahead waits for (the origin's
    /// places for background transfers, or the mount's cap on them): a
    /// transfer that only holds should give it up. Not for scans or
    /// preload, which wait behind playback.
    package func waitsForRoom(at key: HTTPOrigin?, behind priority: Priority) -> Bool {
        guard let origin = origins[key] else { return false }
        if origin.waitingReads > 0 && origin.running >= places(origin) { return true }
        guard Self.isPlay(priority), waitingReadahead > 0 else { return false }
        let readahead = Priority.readahead.rawValue
        if origin.waitingBackground[readahead] > 0 && origin.running >= places(origin) - readReserve { return true }
        return priority == .readahead && !hasRoomUnderCap(.readahead, multiplexed: origin.multiplexed)
    }

    /// The transfers that may start now, in order; they count as running
    /// from here until `remove`.
    package func admit() -> [TransferID] {
        passes += 1
        var started: [TransferID] = []
        while let key = dirty.popFirst() {
            guard let origin = origins[key] else { continue }
            origin.dirty = false
            while origin.running < places(origin), let id = nextRead(at: origin) {
                start(id, at: origin, into: &started)
            }
            for p in Self.backgroundPriorities.map(\.rawValue)
            where origin.waitingBackground[p] > 0 && !origin.inRing[p] {
                origin.inRing[p] = true
                rings[p].append(key)
            }
            if origin.idle { origins[key] = nil }
        }
        for priority in Self.backgroundPriorities {
            let p = priority.rawValue
            // Origins whose pool (multiplexing or not) is full keep their turn.
            var full: [HTTPOrigin?] = []
            while hasRoomUnderCap(priority, multiplexed: false) || hasRoomUnderCap(priority, multiplexed: true),
                  let key = rings[p].popFirst() {
                guard let origin = origins[key] else { continue }
                guard hasRoomUnderCap(priority, multiplexed: origin.multiplexed),
                      priority != .background || !playMoving || !oldestBackgroundWaitsForPlayers(at: origin) else {
                    full.append(key)
                    continue
                }
                origin.inRing[p] = false
                if hasBackgroundRoom(origin), let id = nextBackground(priority, at: origin) {
                    start(id, at: origin, into: &started)
                    if origin.waitingBackground[p] > 0 {
                        origin.inRing[p] = true
                        rings[p].append(key)
                    }
                }
                if origin.idle { origins[key] = nil }
            }
            for key in full { rings[p].append(key) }
        }
        return started
    }

    private func addRead(_ id: TransferID, group name: String, at origin: Origin) {
        let group = origin.groups[name] ?? {
            let made = Group()
            origin.groups[name] = made
            return made
        }()
        group.reads.append(id)
        group.waitingReads += 1
        origin.waitingReads += 1
        guard !group.queued else { return }
        group.queued = true
        if group.running == 0 { origin.fresh.append(name) } else { origin.turns.append(name) }
    }

    /// The next requester's oldest waiting read; the requester goes to the
    /// back of the turns while it has more.
    private func nextRead(at origin: Origin) -> TransferID? {
        while let name = origin.fresh.popFirst() ?? origin.turns.popFirst() {
            guard let group = origin.groups[name] else { continue }
            group.queued = false
            while let id = group.reads.popFirst() {
                guard isWaiting(id, as: .read) else { continue }
                if group.waitingReads > 1 {
                    group.queued = true
                    origin.turns.append(name)
                }
                return id
            }
            if group.idle { origin.groups[name] = nil }
        }
        return nil
    }

    /// Whether the job's transfer that has waited longest at `origin`
    /// (its queue is in the order they were asked for; nothing is promoted
    /// into it) is still within its patience.
    private func oldestBackgroundWaitsForPlayers(at origin: Origin) -> Bool {
        let queue = Priority.background.rawValue
        while let id = origin.background[queue].first, !isWaiting(id, as: .background) {
            _ = origin.background[queue].popFirst()
        }
        guard let id = origin.background[queue].first, let entry = entries[id] else { return false }
        return waitsForPlayers(askedAt: entry.askedAt)
    }

    private func nextBackground(_ priority: Priority, at origin: Origin) -> TransferID? {
        while let id = origin.background[priority.rawValue].popFirst() {
            if isWaiting(id, as: priority) { return id }
        }
        return nil
    }

    private func start(_ id: TransferID, at origin: Origin, into started: inout [TransferID]) {
        guard var entry = entries[id] else { return }
        entry.running = true
        entries[id] = entry
        let group = origin.groups[entry.group] ?? {
            let made = Group()
            origin.groups[entry.group] = made
            return made
        }()
        origin.running += 1
        group.running += 1
        if Self.isPlay(entry.priority) {
            origin.runningPlay += 1
            origin.playStarts += 1
        }
        if entry.priority == .scan, passes > entry.askedAfter + 1,
           entry.behindPlayback || origin.playStarts > entry.playStartsAtAsk {
            scansDelayed += 1
        }
        if entry.priority == .read {
            origin.waitingReads -= 1
            group.waitingReads -= 1
        } else {
            countWaiting(origin, entry.priority.rawValue, -1)
        }
        count(&entry, entry.priority.rawValue, at: origin)
        entries[id] = entry
        started.append(id)
    }

    /// Counts a background transfer that begins (1) or ends (-1) waiting.
    private func countWaiting(_ origin: Origin, _ p: Int, _ delta: Int) {
        origin.waitingBackground[p] += delta
        if p == Priority.readahead.rawValue { waitingReadahead += delta }
    }

    /// A player's transfer: a read now, or its readahead.
    private static func isPlay(_ priority: Priority) -> Bool { priority == .read || priority == .readahead }

    private func isWaiting(_ id: TransferID, as priority: Priority) -> Bool {
        guard let entry = entries[id] else { return false }
        return !entry.running && entry.priority == priority
    }

    private func hasBackgroundRoom(_ origin: Origin) -> Bool {
        origin.waitingReads == 0 && origin.running < places(origin) - readReserve
    }

    private func hasRoomUnderCap(_ priority: Priority, multiplexed: Bool) -> Bool {
        if priority == .probe { return runningByPriority[Priority.probe.rawValue] < maxProbes }
        // A scan's reader waits on it, and a background job's: only their
        // origin's places bound them (its reserve left to reads); a job's,
        // and while no player's transfer moves (players first), unless it
        // has waited its patience out (`admit`, per origin).
        if priority == .scan || priority == .background { return true }
        if multiplexed { return runningMultiplexedBackground < maxMultiplexedBackground }
        let background = runningByPriority[Priority.readahead.rawValue] + runningByPriority[Priority.preload.rawValue]
        return background < maxBackground
    }

    private static func isCapped(_ p: Int) -> Bool {
        p == Priority.readahead.rawValue || p == Priority.preload.rawValue
    }

    /// Counts a transfer that starts running at `origin` at priority `p`.
    private func count(_ entry: inout Entry, _ p: Int, at origin: Origin) {
        entry.multiplexedBackground = Self.isCapped(p) && origin.multiplexed
        if entry.multiplexedBackground {
            runningMultiplexedBackground += 1
        } else {
            runningByPriority[p] += 1
        }
    }

    /// Takes back what `count` counted for a running transfer at priority `p`.
    private func uncount(_ entry: inout Entry, _ p: Int) {
        if entry.multiplexedBackground {
            runningMultiplexedBackground -= 1
            entry.multiplexedBackground = false
        } else {
            runningByPriority[p] -= 1
        }
    }

    /// Drops dead ids once they outnumber the live ones: memory stays
    /// bounded by what waits, however often transfers are cancelled.
    private func compactBackground(_ origin: Origin, _ p: Int) {
        guard origin.background[p].count > 2 * origin.waitingBackground[p] + 64,
              let priority = Priority(rawValue: p) else { return }
        origin.background[p].removeAll { !isWaiting($0, as: priority) }
    }

    private func markDirty(_ key: HTTPOrigin?, _ origin: Origin) {
        guard !origin.dirty else { return }
        origin.dirty = true
        dirty.append(key)
    }
}
