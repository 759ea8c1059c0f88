// Every reader of the mount: an account per process and file, live while a
// handle is open, kept `recentFor` after its last close, at most
// `capacity` at once (the oldest ended go first). The totals of the
// accounts it let go stay counted by process name, so the metrics' counts
// by name never go back; names past `maxNames` count as "other" (a
// metric's labels are bounded).
import MediaSupport

public final class ReaderBook: Sendable {
    /// How long an ended reader stays listed.
    public static let recentFor = 600.0
    /// Accounts kept at once.
    public static let capacity = 256
    /// Process names counted apart in the totals.
    public static let maxNames = 32

    public struct Totals: Sendable, Equatable {
        public var read: Int64 = 0
        public var fetched: Int64 = 0
    }

    private struct Key: Hashable {
        var process: ReaderProcess
        var file: String
    }

    private struct State {
        var accounts: [Key: ReaderAccount] = [:]
        /// Totals of accounts let go, by class and process name.
        var retired: [String: Totals] = [:]
    }

    private let state = Locked(State())
    private let clock: Clock

    package init(clock: Clock = .system) {
        self.clock = clock
    }

    /// The account of `process` reading `file` as `readClass` (`rule`:
    /// the rule that said so), its open handles one more. A background
    /// job's first open is logged, with the rule.
    public func opened(by process: ReaderProcess, as readClass: ReadClass, file: String,
                       rule: String? = nil) -> ReaderAccount {
        let now = clock.wall()
        let (account, new) = state.withLock { state in
            let key = Key(process: process, file: file)
            let account = state.accounts[key] ?? ReaderAccount(process: process, readClass: readClass, file: file,
                                                                since: now, rule: rule)
            account.opened()
            let new = state.accounts[key] == nil
            if new {
                prune(&state, now: now, making: 1)
                state.accounts[key] = account
            }
            return (account, new)
        }
        if new && readClass == .background {
            Log.info("background reader: \(account.described) (\(rule ?? "by name"))")
        }
        return account
    }

    /// One of the account's handles closed; a background job's last close
    /// is logged with what it cost.
    public func closed(_ account: ReaderAccount) {
        guard account.closed(at: clock.wall()), account.readClass == .background else { return }
        Log.info("background reader ended: \(account.described): read \(account.bytesRead) bytes, "
                 + "fetched \(account.bytesFetched)")
    }

    /// Live readers first (by bytes read), then ended ones (latest first).
    public func readers() -> [ReaderAccount] {
        let now = clock.wall()
        let accounts = state.withLock { state in
            prune(&state, now: now, making: 0)
            return Array(state.accounts.values)
        }
        return accounts.sorted { a, b in
            switch (a.endedAt, b.endedAt) {
            case (nil, nil): return a.bytesRead != b.bytesRead ? a.bytesRead > b.bytesRead : a.since < b.since
            case (nil, _): return true
            case (_, nil): return false
            case (let x?, let y?): return x > y
            }
        }
    }

    /// Bytes read and fetched by class label and process name, every reader
    /// of the mount's life.
    public func totals() -> [String: Totals] {
        state.withLock { state in
            var totals = state.retired
            for account in state.accounts.values {
                Self.add(account, to: &totals)
            }
            return totals
        }
    }

    /// `class/name` of a total: its class label and its process's name, or
    /// "other" past `maxNames` names.
    static func key(_ account: ReaderAccount, names: Int, known: Bool) -> String {
        account.readClass.label + "/" + (known || names < maxNames ? account.process.name : "other")
    }

    private static func add(_ account: ReaderAccount, to totals: inout [String: Totals]) {
        let name = key(account, names: totals.count, known: totals[key(account, names: 0, known: true)] != nil)
        totals[name, default: Totals()].read += account.bytesRead
        totals[name, default: Totals()].fetched += account.bytesFetched
    }

    /// Lets go of ended accounts older than `recentFor`, and of the oldest
    /// ended ones while `making` more would pass `capacity`. A live one is
    /// never let go: its handles hold it.
    private func prune(_ state: inout State, now: Double, making more: Int) {
        for (key, account) in state.accounts {
            if let ended = account.endedAt, now - ended > Self.recentFor {
                Self.add(account, to: &state.retired)
                state.accounts[key] = nil
            }
        }
        guard state.accounts.count + more > Self.capacity else { return }
        let ended = state.accounts.compactMap { key, account in account.endedAt.map { (key, $0) } }
            .sorted { $0.1 < $1.1 }
        for (key, _) in ended.prefix(state.accounts.count + more - Self.capacity) {
            Self.add(state.accounts[key]!, to: &state.retired)
            state.accounts[key] = nil
        }
    }
}
