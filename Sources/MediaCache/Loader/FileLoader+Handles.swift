// The file's open handles and the kernel's view of them: which version a
// handle reads, whether it may use the page cache, closed handles within
// their grace, and the kernel forgetting a changed file's pages.
import Foundation
import MediaSupport

extension FileLoader {
    /// How a new handle may use the kernel's page cache of the file.
    public enum PageCacheUse: Equatable, Sendable {
        /// The kernel holds no page of another version: keep its pages.
        case keep
        /// It may: the open drops them (no keep_cache) before it returns.
        case drop
        /// A handle of an older version still reads through the page cache:
        /// this one goes around it (direct I/O), so neither sees the other's pages.
        case bypass
    }

    /// A handle opened: its reads belong to the content version of now.
    /// `throughPageCache`: the kernel reads it through its page cache (not
    /// passthrough); the answer says how, decided with the version it reads.
    @discardableResult
    public func attach(_ pattern: ReadPattern, throughPageCache: Bool = true) -> PageCacheUse {
        lock.withLock { state in
            if state.handles.opened() == 1 { startLookahead(in: &state) }
            state.handles.account(pattern, open: true)
            let generation = state.version.generation
            pattern.generation = generation
            guard throughPageCache else { return .keep }
            if state.handles.pageCacheHeld(byOtherThan: generation) { return .bypass }
            state.handles.pageCacheOpened(generation: generation)
            pattern.inPageCache = true
            return state.handles.kernelClean == generation ? .keep : .drop
        }
    }

    /// Its handles open now (released ones within their grace are not).
    public var openHandles: Int {
        lock.withLock { $0.handles.openHandles }
    }

    /// Closed handles kept for `--handle-grace` at once, per file; past
    /// it the oldest goes.
    static let maxLingering = 8

    /// A handle closed: what it alone asked for is no longer needed, but a
    /// player's handle of the current version that has read is kept for
    /// the grace period, its transfers running: servers close and open a
    /// file every few MiB of a stream.
    public func release(_ pattern: ReadPattern) {
        lock.withLock { state in
            if pattern.inPageCache, let opened = pattern.generation {
                state.handles.pageCacheClosed(generation: opened)
                pattern.inPageCache = false
            }
            if state.handles.closed() == 0 {
                stopLookahead(in: &state)
                state.passing.clear()
            }
            state.handles.account(pattern, open: false)
            endLingering(&state, all: false)
            state.handles.removeFresh(ObjectIdentifier(pattern))
            _ = state.fetches.takeYielded(by: ObjectIdentifier(pattern))
            if settings.handleGrace > 0, pattern.readClass == .play, pattern.hasRead,
               pattern.generation == state.version.generation {
                if handOver(pattern, in: &state) { return }
                if state.handles.lingering.count >= Self.maxLingering,
                   let oldest = state.handles.lingering.min(by: { $0.value.until < $1.value.until })?.key {
                    state.handles.endLingering(oldest)
                    cancelTransfers(of: oldest, except: nil, in: &state)
                }
                state.handles.linger(pattern, until: now() + settings.handleGrace)
                return
            }
            cancelTransfers(of: ObjectIdentifier(pattern), except: nil, in: &state)
        }
    }

    /// Stops the transfers of closed handles whose grace ended (`all`: of
    /// every closed handle).
    func endLingering(_ state: inout LoaderState, all: Bool) {
        guard !state.handles.lingering.isEmpty else { return }
        let now = now()
        for (owner, closed) in state.handles.lingering where all || closed.until <= now {
            state.handles.endLingering(owner)
            cancelTransfers(of: owner, except: nil, in: &state)
        }
    }

    /// A closing handle whose sequel was opened (and read) before this
    /// release: the sequel, still on the streak it began where this one
    /// would read next, takes this one's streak and transfers.
    func handOver(_ closing: ReadPattern, in state: inout LoaderState) -> Bool {
        guard let (id, heir) = state.handles.fresh.first(where: {
            $0.value.firstStreakStart >= 0 && closing.follows($0.value.firstStreakStart)
                && $0.value.generation == closing.generation
        }) else { return false }
        state.handles.removeFresh(id)
        heir.inherit(closing)
        let owner = ObjectIdentifier(closing)
        state.fetches.handOver(from: owner, to: id)
        statistics.graceResumes.add(1, ordering: .relaxed)
        return true
    }

    /// A new player's handle whose first read is where a closed handle
    /// (within its grace) would read next takes that handle's pattern and
    /// its transfers: no cold start, no transfer stopped and asked again.
    func resumeLingering(_ pattern: ReadPattern, at offset: Int64, in state: inout LoaderState) {
        endLingering(&state, all: false)
        guard let (owner, closed) = state.handles.lingering.first(where: {
            $0.value.pattern.follows(offset) && $0.value.pattern.generation == pattern.generation
        }) else { return }
        state.handles.endLingering(owner)
        pattern.resume(from: closed.pattern)
        let heir = ObjectIdentifier(pattern)
        state.fetches.handOver(from: owner, to: heir)
        statistics.graceResumes.add(1, ordering: .relaxed)
        Log.debug("\(source.displayURL): a new handle goes on from byte \(offset) with a closed one's transfers")
    }

    /// The kernel has dropped the pages and attributes of every name of the
    /// file as of `generation`: opens of that version may keep pages again.
    public func kernelForgot(generation forgotten: Int) {
        defer { lock.broadcast() }
        lock.withLock { $0.handles.kernelForgot(upTo: forgotten) }
    }

    /// Waits (bounded) until the kernel has dropped what it held of older
    /// versions; false on timeout. An open that saw the change waits, so
    /// its handle's fstat already shows the new size.
    @discardableResult
    public func awaitKernelForgot(timeout: Double) -> Bool {
        let deadline = deadline(after: timeout)
        return lock.withScope { scope in
            while scope.state.handles.kernelClean < scope.state.version.generation {
                if !scope.wait(until: deadline) { return scope.state.handles.kernelClean >= scope.state.version.generation }
            }
            return true
        }
    }
}
