// `--background-daily SIZE`: the network bytes background jobs may fetch
// in a UTC day. Fetched bytes of the class are charged as they arrive (so
// transfers already running when it runs out finish: the overshoot is at
// most what they had left); once used up, a background read of bytes not
// in the cache fails at once (FileLoader+Planning), cached bytes are still
// served, and players and scans are never charged. The count survives a
// remount: kept in the cache directory by each flusher pass and at stop.
import MediaStore
import MediaSupport

public final class BackgroundAllowance: Sendable {
    public let bytesPerDay: Int64

    private struct State {
        var day: Int64
        var used: Int64
        var saved: Int64?
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

    /// Whether today's bytes are used up.
    public var exhausted: Bool { usedToday >= bytesPerDay }

    /// Background bytes that arrived.
    func charge(_ count: Int64) {
        let today = Self.day(clock.wall())
        state.withLock { state in
            if state.day != today {
                state.day = today
                state.used = 0
            }
            state.used = state.used.addingSaturating(count)
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
