// A file's transfers and the reads waiting on them: what runs, what each
// read waits for, and the failures a server has made of late (backoff,
// the outage said once, the kernel's retries refused while it lasts).
// Part of LoaderState: touched only under the loader's lock.
import Foundation
import MediaNetwork
import MediaSupport

struct TransferBook {
    /// The loader's clock: when `lastError` was set.
    let clock: Clock
    private(set) var transfers: [TransferID: LoaderState.Transfer] = [:]
    /// Reads waiting for bytes, by wait number.
    private(set) var waits: [Int: LoaderState.Wait] = [:]
    /// Reads begun and not yet waiting (their lookup's probe, their wait
    /// for room), by number: a transfer's bytes they will wait on are
    /// theirs already. A probe's second chunk once came in that gap, found
    /// no room and no wait, and passed to the read uncached.
    private var coming: [Int: Range<Int64>] = [:]
    private var nextWait = 0
    /// Long transfers that gave their connection up (`FetchError.yielded`),
    /// by owner: the owner's next cached read reads ahead again at once,
    /// as it would have let the transfer go on.
    private(set) var yielded: Set<ObjectIdentifier> = []
    /// Bumped each time the cache stops every transfer (purge, change), so
    /// a read does not count those as the server's failures.
    private(set) var stops = 0
    private(set) var lastError: MediaError?
    private(set) var lastErrorAt = 0.0
    /// When the next transfer may start: a failing server is retried with
    /// backoff, or when its Retry-After says.
    private(set) var retryAt = 0.0
    private(set) var failuresInARow = 0
    /// Whether a failure of this file was logged since its last transfer
    /// that got every byte it asked for: a server down is one log line per
    /// file, not one per read and retry (the rest go to debug).
    private(set) var outageLogged = false
    /// After a read gave up, reads fail at once until then, so the kernel's
    /// own retries of a failed read do not each wait through the backoff.
    private(set) var unavailableUntil = 0.0

    init(clock: Clock) {
        self.clock = clock
    }

    /// The failure reads report until a transfer succeeds; nil clears it.
    mutating func setLastError(_ error: MediaError?) {
        lastError = error
        lastErrorAt = clock.monotonic()
    }

    /// Every transfer is being stopped by the cache itself.
    mutating func countStop() { stops += 1 }

    /// A number no read or wait of this loader has had: the tokens of
    /// preads (`CachedBytes.reading`) and of waits are drawn from it.
    mutating func takeNumber() -> Int {
        defer { nextWait += 1 }
        return nextWait
    }

    /// Registers a read waiting for `range`; returns its number.
    mutating func addWait(_ range: Range<Int64>, buffer: UnsafeMutableRawBufferPointer) -> Int {
        let number = takeNumber()
        waits[number] = LoaderState.Wait(range: range, buffer: buffer)
        return number
    }

    mutating func removeWait(_ number: Int) { waits[number] = nil }

    /// A read of `range` has begun; returns its number for `arrived`.
    mutating func announce(_ range: Range<Int64>) -> Int {
        let number = takeNumber()
        coming[number] = range
        return number
    }

    /// The read announced as `number` waits (or has ended).
    mutating func arrived(_ number: Int) { coming[number] = nil }

    /// Bytes arrived for a waiting read, copied into its buffer.
    mutating func filled(_ number: Int, _ range: Range<Int64>) { waits[number]?.filled.insert(range) }

    /// Whether a read waits on bytes of `range`, or will.
    func isWaitedOn(_ range: Range<Int64>) -> Bool {
        waits.values.contains(where: { $0.range.overlaps(range) }) || coming.values.contains(where: { $0.overlaps(range) })
    }

    // MARK: Transfers

    mutating func add(_ id: TransferID, _ transfer: LoaderState.Transfer) { transfers[id] = transfer }

    /// A transfer's answer was taken (`accept`): its record as it now stands.
    mutating func replace(_ id: TransferID, with transfer: LoaderState.Transfer) {
        guard transfers[id] != nil else { return }
        transfers[id] = transfer
    }

    mutating func remove(_ id: TransferID) -> LoaderState.Transfer? { transfers.removeValue(forKey: id) }

    /// Asked to stop: no read counts on it any more, and nothing it still
    /// hands over is kept (a purge, a change, the file leaving the mount).
    mutating func cancel(_ id: TransferID) {
        transfers[id]?.cancelled = true
        transfers[id]?.keepsArrivals = false
    }

    /// Asked to stop by its reader (a seek, a close): no read counts on it
    /// any more, but what it hands over until the stop reaches the network
    /// thread is kept.
    mutating func stop(_ id: TransferID) {
        guard transfers[id]?.cancelled == false else { return }
        transfers[id]!.cancelled = true
        transfers[id]!.keepsArrivals = true
    }

    /// It will bring no byte past `end`.
    mutating func cut(_ id: TransferID, at end: Int64) {
        guard let transfer = transfers[id] else { return }
        transfers[id]!.end = min(transfer.end, end)
        if let limit = transfer.limit { transfers[id]!.limit = min(limit, end) }
    }

    mutating func promote(_ id: TransferID, to priority: FetchRequest.Priority) { transfers[id]?.priority = priority }

    /// A long transfer is let go on to `limit`.
    mutating func hold(_ id: TransferID, at limit: Int64) { transfers[id]?.limit = limit }

    mutating func reserve(_ bytes: Int64, for id: TransferID) { transfers[id]?.reserved += bytes }

    /// `bytes` more of it count against `--background-daily` from now.
    mutating func commit(_ bytes: Int64, for id: TransferID) { transfers[id]?.committed += bytes }

    /// `bytes` of its reserved room were used (all of it: nil).
    mutating func useReserved(_ bytes: Int64?, of id: TransferID) {
        guard let reserved = transfers[id]?.reserved else { return }
        transfers[id]!.reserved = bytes.map { reserved - $0 } ?? 0
    }

    /// `count` bytes of it arrived: how many of them were committed
    /// against `--background-daily` when it started.
    mutating func useCommitted(_ count: Int64, of id: TransferID) -> Int64 {
        guard let committed = transfers[id]?.committed, committed > 0 else { return 0 }
        let used = min(committed, count)
        transfers[id]!.committed = committed - used
        return used
    }

    /// Its body reached `position`.
    mutating func advance(_ id: TransferID, to position: Int64) { transfers[id]?.position = position }

    mutating func rateTold(_ id: TransferID) { transfers[id]?.rateTold = true }

    /// `pattern`'s stream starts when `id` answers (Transfer.streamOnAnswer).
    mutating func streamOnAnswer(of id: TransferID, for pattern: ReadPattern, read: Range<Int64>) {
        transfers[id]?.streamOnAnswer = (pattern, read)
    }

    /// The transfers of a closed handle go on for the handle that reads on.
    mutating func handOver(from owner: ObjectIdentifier, to heir: ObjectIdentifier) {
        for (id, transfer) in transfers where transfer.owner == owner { transfers[id]!.owner = heir }
    }

    /// A player's stream started ahead of it (FileLoader+Lookahead) is the
    /// handle's from the read that joins it (FileLoader+Planning): its seek
    /// stops it, its reads let it go on, its close hands it on, its bytes
    /// count in the handle's account.
    mutating func assign(_ id: TransferID, to owner: ObjectIdentifier, account: ReaderAccount?) {
        transfers[id]?.owner = owner
        transfers[id]?.account = account
    }

    /// A long transfer of `owner` gave its connection up: its next cached
    /// read reads ahead again at once.
    mutating func yielded(by owner: ObjectIdentifier) { yielded.insert(owner) }

    /// Whether `owner` had a transfer give its connection up (and forgets it).
    mutating func takeYielded(by owner: ObjectIdentifier) -> Bool { yielded.remove(owner) != nil }

    // MARK: Failures

    /// Every byte a transfer asked for arrived: the server answers. Returns
    /// whether an outage had been logged (its end is said too).
    mutating func succeeded() -> Bool {
        setLastError(nil)
        failuresInARow = 0
        retryAt = 0
        defer { outageLogged = false }
        return outageLogged
    }

    /// A transfer failed: the next waits `backoff(failures in a row)` from `now`.
    mutating func failed(now: Double, backoff: (_ failures: Int) -> Double) {
        failuresInARow += 1
        retryAt = max(retryAt, now + backoff(failuresInARow))
    }

    /// The server said when to come back.
    mutating func retry(at time: Double) { retryAt = time }

    /// Whether this failure is the first of the outage to be logged (and
    /// marks it logged).
    mutating func claimOutageLog() -> Bool {
        defer { outageLogged = true }
        return !outageLogged
    }

    /// A read gave up: reads fail at once until `until`, and the next one
    /// after starts a fresh count of failures.
    mutating func unavailable(until: Double) {
        unavailableUntil = until
        failuresInARow = 0
    }

    /// What holds a read back from asking the server now.
    enum Refusal: Equatable {
        /// Fail at once, with this errno and message.
        case fail(Int32, String)
        /// Wait for the backoff (`retryAt`).
        case wait
    }

    /// Whether the server's recent failures keep a read from asking now,
    /// in this order: a VOD's part without its key (ENOKEY) fails as EIO
    /// until the key comes (`forgetFailures`), never cipher text, never a
    /// retry; a 404 or 403 is believed for `believeMissingFor` seconds, not
    /// forever; after a read gave up, reads fail until `unavailableUntil`;
    /// within the backoff, the read waits. `now` on the loader's clock.
    func refusal(at now: Double, believeMissingFor: Double) -> Refusal? {
        if let error = lastError, error.errno == ENOKEY { return .fail(EIO, error.message) }
        if let error = lastError, error.errno == ENOENT || error.errno == EACCES, now - lastErrorAt < believeMissingFor {
            return .fail(error.errno, error.message)
        }
        if let error = lastError, now < unavailableUntil { return .fail(error.errno, error.message) }
        if now < retryAt { return .wait }
        return nil
    }

    /// What reads failed with, and their backoff, are forgotten.
    mutating func forgetFailures() {
        setLastError(nil)
        failuresInARow = 0
        retryAt = 0
        unavailableUntil = 0
    }
}
