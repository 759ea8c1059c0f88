// `--background-daily SIZE`: the network bytes background jobs may fetch
// in a UTC day. A background transfer counts its bytes against the day's
// when it starts (`commit`), so a read is admitted only if its bytes fit
// beside those fetched and those on their way: jobs reading at once cannot
// pass the cap together (the kernel's readahead reads are megabytes each).
// Fetched bytes are charged as they arrive, taking the place of what was
// committed for them; what a transfer never brought is given back at its
// end. A background read that does not fit fails at once (EIO,
// FileLoader+Planning), cached bytes are still served, and players and
// scans are never charged. The count survives a
// remount: kept in the cache directory by each flusher pass and at stop.
import MediaStore
import MediaSupport

public final class BackgroundAllowance: Sendable {
    public let bytesPerDay: Int64

    private struct State {
        var day: Int64
        var used: Int64
        var saved: Int64?
        /// Bytes running background transfers will bring, counted already.
        var committed: Int64 = 0

        /// Today's, a new day starting from 0 fetched.
        mutating func roll(to today: Int64) {
            guard day != today else { return }
            day = today
            used = 0
        }
    }

    private let state: Locked<State>
    private let store: CacheStore?
    private let clock: Clock

    /// `store`: where the count is kept (nil: a test's, in memory).
    package init(bytesPerDay: Int64, store: CacheStore?, clock: Clock = .system) {
        self.bytesPerDay = bytesPerDay
        self.store = store
        self.clock = clock
        let today = Self.day(clock.wall())
        let kept = store?.loadBackgroundUse()
        let used = kept.flatMap { $0.day == today ? $0.bytes : nil } ?? 0
        state = Locked(State(day: today, used: used, saved: kept?.day == today ? used : nil))
    }

    static func day(_ wall: Double) -> Int64 { Int64((max(wall, 0) / 86_400).rounded(.down)) }

    /// Bytes fetched today; a new day starts from 0.
    public var usedToday: Int64 {
        let today = Self.day(clock.wall())
        return state.withLock { $0.day == today ? $0.used : 0 }
    }

    /// Whether today's bytes are used up, or all on their way.
    public var exhausted: Bool { !admits(1) }

    /// Whether `count` more bytes fit beside those fetched today and those
    /// running transfers will bring.
    func admits(_ count: Int64) -> Bool { count <= room }

    /// Bytes that still fit today beside those fetched and on their way.
    var room: Int64 {
        let today = Self.day(clock.wall())
        return state.withLock { state in
            state.roll(to: today)
            return max(bytesPerDay - state.used.addingSaturating(state.committed), 0)
        }
    }

    /// A background transfer of `count` bytes starts: they count now.
    func commit(_ count: Int64) {
        state.withLock { $0.committed = $0.committed.addingSaturating(max(count, 0)) }
    }

    /// A transfer ended with `count` committed bytes it never brought.
    func uncommit(_ count: Int64) {
        guard count > 0 else { return }
        state.withLock { $0.committed = max($0.committed - count, 0) }
    }

    /// Background bytes that arrived, `committed` of them counted when
    /// their transfer started.
    func charge(_ count: Int64, committed: Int64 = 0) {
        let today = Self.day(clock.wall())
        state.withLock { state in
            state.roll(to: today)
            state.used = state.used.addingSaturating(count)
            state.committed = max(state.committed - committed, 0)
        }
    }

    /// Keeps the count in the cache directory if it changed since.
    public func save() {
        guard let store else { return }
        let (day, used, changed) = state.withLock { ($0.day, $0.used, $0.saved != $0.used) }
        guard changed else { return }
        do {
            try store.saveBackgroundUse(day: day, bytes: used)
            state.withLock { if $0.day == day { $0.saved = used } }
        } catch let error as MediaError {
            Log.warning("background bytes of today not kept: \(error.message)")
        } catch {}
    }
}
