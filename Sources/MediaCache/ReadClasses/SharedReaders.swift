// The processes other than its opener that read one open handle: a
// descriptor inherited across fork or passed to a child as its stdin (a
// Python job's `Popen([...], stdin=open(file))`, a shell's `{ cmd1; cmd2; }
// < file`). Each such process gets an account of its own for the file, live
// until the handle closes, so `status --readers` names who read the bytes,
// not only who opened them. The handle's class, readahead and transfers stay
// the opener's: the bytes a shared handle's transfers fetch count in the
// opener's account, as its readahead serves whichever process reads next.
//
// A read names its thread; the thread's process is looked up once per
// handle (its first read reads /proc through the classifier) and then
// remembered, for at most `maxThreads` threads, past which reads count as
// the opener's. A process that opened the file and then exec'd another
// program keeps its pid: its reads stay in the opener's account.
import MediaSupport

public final class SharedReaders: Sendable {
    /// Threads remembered per handle.
    public static let maxThreads = 64

    private struct State {
        /// Each thread seen: nil for the opener's threads, else its process's account.
        var threads: [Int32: ReaderAccount?] = [:]
        /// Accounts opened for other processes, closed with the handle.
        var borrowed: [ReaderProcess: ReaderAccount] = [:]
        var closed = false
    }

    private let opener: ReaderProcess
    private let readClass: ReadClass
    private let file: String
    private let book: ReaderBook
    private let lookUp: @Sendable (Int32) -> ReaderProcess?
    private let state = Locked(State())

    /// `lookUp` names the process of a thread (nil: it cannot be told).
    public init(opener: ReaderProcess, readClass: ReadClass, file: String, book: ReaderBook,
                lookUp: @escaping @Sendable (Int32) -> ReaderProcess?) {
        self.opener = opener
        self.readClass = readClass
        self.file = file
        self.book = book
        self.lookUp = lookUp
    }

    /// The account a read made by `thread` counts in, when its process is
    /// not the opener; nil when it is, or cannot be told.
    public func account(thread: Int32) -> ReaderAccount? {
        guard thread > 0 else { return nil }
        let known = state.withLock { state -> ReaderAccount?? in
            if let known = state.threads[thread] { return .some(known) }
            return state.threads.count < Self.maxThreads ? nil : .some(nil)
        }
        if let known { return known }
        // /proc is read outside the lock. The book's lock, a leaf, is taken
        // inside it (to open an account at most once per process).
        let process = lookUp(thread)
        return state.withLock { state in
            if let known = state.threads[thread] { return known }
            guard !state.closed, state.threads.count < Self.maxThreads else { return nil }
            guard let process, process.pid != opener.pid || process.startTime != opener.startTime else {
                state.threads[thread] = .some(nil)
                return nil
            }
            let account = state.borrowed[process] ?? book.opened(by: process, as: readClass, file: file)
            state.borrowed[process] = account
            state.threads[thread] = account
            return account
        }
    }

    /// The handle closed: every process that read it through the opener's
    /// descriptor ends its reading too.
    public func close() {
        let accounts = state.withLock { state -> [ReaderAccount] in
            state.closed = true
            return Array(state.borrowed.values)
        }
        for account in accounts { book.closed(account) }
    }
}
