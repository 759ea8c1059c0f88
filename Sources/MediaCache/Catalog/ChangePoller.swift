// `--poll-interval` (decision 0049): each listed directory whose kind can
// tell (ChangePolling: WebDAV, HTML index, S3) is asked, once per interval,
// whether it changed since its last believed listing, for the least its
// kind can ask; only a changed one is listed again, through the listings'
// refresh path (so a listing that drops most names is still doubted,
// 0047). Polls run one at a time on a thread of their own, at most
// `perSecond` a second, each sent through the mount's fetcher at the
// lowest priority (`.background`): behind every reader, scan and preload
// of its origin, and paused while a read moves bytes.
//
// It owns the schedule and each directory's token; the kinds own how they
// ask. Directories are held weakly: one that left the tree stops being
// polled. Lock: `state`, a leaf (the fetcher's lock is taken under it to
// start a poll, so that `stop` never misses one it must cancel).
import Foundation
import MediaNetwork
import MediaSources
import MediaSupport

final class ChangePoller: Sendable {
    typealias Directory = CatalogState.Directory

    private struct Watched {
        weak var directory: Directory?
        var token: ChangeToken?
        var dueAt: Double
        /// A failed poll was logged as a warning; the next ones at debug level.
        var failing = false
    }

    private struct State {
        var watched: [ObjectIdentifier: Watched] = [:]
        /// Directories in the order they fall due (the interval is one for
        /// all): an entry whose `dueAt` is not the watched one's is stale.
        var queue = FIFO<(id: ObjectIdentifier, dueAt: Double)>()
        var stopped = false
        var running = false
        /// The poll in flight, cancelled by `stop`.
        var current: QueuedFetch?
        /// When the last poll was sent: the next waits 1/perSecond after it.
        var lastSent = -Double.infinity
    }

    let settings: PollSchedule
    private let state = ConditionLocked(State())
    private let fetcher: Fetching
    private let clock: Clock
    /// How long one poll may take.
    private let timeout: Double

    init(settings: PollSchedule, fetcher: Fetching, clock: Clock, timeout: Double) {
        self.settings = settings
        self.fetcher = fetcher
        self.clock = clock
        self.timeout = timeout
    }

    /// A believed listing of `directory` said `token`: it is next asked an
    /// interval from now.
    func note(_ directory: Directory, token: ChangeToken?) {
        guard directory.listing is any ChangePolling else { return }
        let dueAt = clock.monotonic() + settings.interval
        let id = ObjectIdentifier(directory)
        state.withScope { scope in
            scope.state.watched[id] = Watched(directory: directory, token: token, dueAt: dueAt)
            scope.state.queue.append((id, dueAt))
            scope.broadcast()
        }
    }

    /// How many directories are watched now.
    var watchedCount: Int { state.withLock { $0.watched.count } }

    /// Starts the thread; `relist` has a directory a poll found changed
    /// listed again (it returns at once), `seen` what the poll saw.
    func start(relist: @escaping @Sendable (Directory, ChangeToken?) -> Void) {
        state.withLock { $0.running = true }
        let thread = Thread { [self] in
            while let (directory, token) = next() {
                poll(directory, since: token, relist: relist)
            }
            state.withScope { scope in
                scope.state.running = false
                scope.broadcast()
            }
        }
        thread.name = "mediafs-polls"
        thread.start()
    }

    /// Cancels the poll in flight and returns once the thread has left.
    /// Safe to call twice, or without `start`.
    func stop() {
        state.withScope { scope in
            scope.state.stopped = true
            scope.state.current?.cancel()
            scope.broadcast()
            while scope.state.running { scope.wait() }
        }
    }

    /// The next directory due, once it is due and the rate allows; nil
    /// once stopped.
    private func next() -> (Directory, ChangeToken?)? {
        state.withScope { scope -> (Directory, ChangeToken?)? in
            while !scope.state.stopped {
                guard let head = scope.state.queue.first else {
                    scope.wait()
                    continue
                }
                guard let watched = scope.state.watched[head.id], watched.dueAt == head.dueAt else {
                    _ = scope.state.queue.popFirst()
                    continue
                }
                guard let directory = watched.directory else {
                    _ = scope.state.queue.popFirst()
                    scope.state.watched[head.id] = nil
                    continue
                }
                let at = max(head.dueAt, scope.state.lastSent + 1 / settings.perSecond)
                if clock.monotonic() < at {
                    _ = scope.wait(until: Deadline(at: at, clock: clock))
                    continue
                }
                _ = scope.state.queue.popFirst()
                scope.state.lastSent = clock.monotonic()
                return (directory, watched.token)
            }
            return nil
        }
    }

    /// Asks one directory; schedules its next poll (a believed listing
    /// schedules it again with its own token).
    private func poll(_ directory: Directory, since token: ChangeToken?,
                      relist: @Sendable (Directory, ChangeToken?) -> Void) {
        guard let listing = directory.listing as? any ChangePolling else { return }
        var request = listing.changeRequest(since: token)
        request.priority = .background
        request.group = "mediafs-polls"
        let fetcher = self.fetcher
        guard let fetch = state.withLock({ state -> QueuedFetch? in
            guard !state.stopped else { return nil }
            state.current = QueuedFetch(request, through: fetcher, maxBytes: TextFetch.maxBytes)
            return state.current
        }) else { return }
        let verdict: ChangeToken.Verdict
        do {
            defer { state.withLock { $0.current = nil } }
            verdict = try listing.verdict(on: try fetch.answer(until: Deadline.after(seconds: timeout, clock: clock)),
                                          since: token)
        } catch {
            let message = (error as? MediaError)?.message ?? "\(error)"
            let first = reschedule(directory, polledWith: token, keeping: token, failing: true)
            if first { Log.warning("poll of \(listing.origin): \(message); asked again in \(Int(settings.interval)) s") }
            else { Log.debug("poll of \(listing.origin): \(message)") }
            return
        }
        switch verdict {
        case .unchanged(let kept):
            _ = reschedule(directory, polledWith: token, keeping: kept, failing: false)
        case .changed(let seen):
            Log.debug("poll of \(listing.origin): changed; listing it again")
            // Asked again in an interval unless the listing is believed first.
            _ = reschedule(directory, polledWith: token, keeping: token, failing: false)
            relist(directory, seen)
        }
    }

    /// Next asked an interval from now, with `kept`, unless a listing noted
    /// a newer token than the one polled with meanwhile; whether this is
    /// the first failure in a row.
    private func reschedule(_ directory: Directory, polledWith token: ChangeToken?, keeping kept: ChangeToken?,
                            failing: Bool) -> Bool {
        let dueAt = clock.monotonic() + settings.interval
        let id = ObjectIdentifier(directory)
        return state.withLock { state in
            // A listing believed meanwhile noted a newer token.
            guard var watched = state.watched[id], watched.directory === directory, watched.dueAt < dueAt,
                  watched.token == token else { return false }
            let first = failing && !watched.failing
            watched.failing = failing
            watched.token = kept
            watched.dueAt = dueAt
            state.watched[id] = watched
            state.queue.append((id, dueAt))
            return first
        }
    }
}
