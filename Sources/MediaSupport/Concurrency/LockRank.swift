// Every ranked lock of the daemon, in the order a thread may take them:
// outermost first. A lock is taken only while every lock the thread holds
// has a lower rank (or the same rank, for a rank that nests in itself).
// Debug builds check it on every take (`HeldRanks`), so the unit suite
// fails on a nesting against this order, naming both locks; release builds
// pay nothing. docs/architecture.md's "Lock order" is this list with the
// nestings the code makes. A lock made without a rank is not checked.
//
// The names are of locks in upper layers too (MediaCache, MediaFS): this
// file is the one place the whole order is written, below every layer that
// takes a lock.
#if canImport(Glibc)
import Glibc
#endif

package struct LockRank: Sendable, CustomStringConvertible {
    package let level: Int
    package let name: String
    /// Two locks of this rank may nest: a VOD segment's probe sends its
    /// request while its VOD's probe holds its own `current`.
    package let nests: Bool

    package init(_ level: Int, _ name: String, nests: Bool = false) {
        self.level = level
        self.name = name
        self.nests = nests
    }

    package var description: String { "\(name) (rank \(level))" }

    // The chain, outermost first.
    package static let passthrough = LockRank(10, "Passthrough.files")
    package static let catalogState = LockRank(30, "Catalog.state")
    package static let loaderFlush = LockRank(40, "FileLoader.flushLock")
    package static let loader = LockRank(50, "FileLoader.lock")
    package static let contentProbe = LockRank(60, "ContentProbe.current", nests: true)
    package static let flusher = LockRank(70, "Flusher.state")
    package static let trashQueued = LockRank(80, "TrashWorker.queued")
    // Leaves: nothing but the log is taken under them.
    package static let segmented = LockRank(90, "a VOD's segmented locks")
    package static let budget = LockRank(100, "CacheBudget.state")
    package static let fetcherPending = LockRank(100, "CurlFetcher.pending")
    package static let linkEstimate = LockRank(100, "LinkEstimate.links")
    package static let answerJournal = LockRank(100, "AnswerJournal.state")
    package static let worker = LockRank(100, "Worker.condition")
    package static let openDataFiles = LockRank(100, "OpenDataFiles.table")
    package static let probeFeeder = LockRank(100, "ProbeFeeder.state")
    package static let contentProbeProgress = LockRank(100, "ContentProbe.progress")
    package static let readPattern = LockRank(100, "ReadPattern.core")
    /// Every log line may take it, under any lock.
    package static let log = LockRank(1000, "Log.captured")
}

/// The ranks a thread holds, checked as it takes another (debug builds).
package enum HeldRanks {
    /// What a violation does: a trap by default; a test records instead.
    /// Set only by tests, before the locks it checks are taken.
    nonisolated(unsafe) public static var onViolation: @Sendable (String) -> Void = { message in
        preconditionFailure(message)
    }

    private final class Stack {
        var ranks: [LockRank] = []
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { pointer in
            if let pointer { Unmanaged<Stack>.fromOpaque(pointer).release() }
        }
        return key
    }()

    private static var stack: Stack {
        if let pointer = pthread_getspecific(key) { return Unmanaged<Stack>.fromOpaque(pointer).takeUnretainedValue() }
        let stack = Stack()
        pthread_setspecific(key, Unmanaged.passRetained(stack).toOpaque())
        return stack
    }

    /// Before waiting for `rank`'s lock: every lock held must come before it.
    /// `trying`: a try-lock, which cannot deadlock, is not checked.
    @inline(__always)
    static func willTake(_ rank: LockRank?, trying: Bool = false) {
        #if DEBUG
        guard let rank, !trying else { return }
        for held in stack.ranks where held.level > rank.level || (held.level == rank.level && !rank.nests) {
            onViolation("lock order: taking \(rank) while holding \(held)")
            return
        }
        #endif
    }

    @inline(__always)
    static func took(_ rank: LockRank?) {
        #if DEBUG
        guard let rank else { return }
        stack.ranks.append(rank)
        #endif
    }

    @inline(__always)
    static func released(_ rank: LockRank?) {
        #if DEBUG
        guard let rank else { return }
        let ranks = stack
        if let index = ranks.ranks.lastIndex(where: { $0.level == rank.level && $0.name == rank.name }) {
            ranks.ranks.remove(at: index)
        }
        #endif
    }

    /// The ranks this thread holds now, outermost first (debug builds; empty otherwise).
    package static var current: [LockRank] {
        #if DEBUG
        return stack.ranks
        #else
        return []
        #endif
    }
}
