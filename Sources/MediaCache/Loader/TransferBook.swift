// A file's transfers and the reads waiting on them: what runs, what each
// read waits for, and the failures a server has made of late (backoff,
// the outage said once, the kernel's retries refused while it lasts).
// Part of LoaderState: touched only under the loader's lock.

struct TransferBook {
    /// The loader's clock: when `lastError` was set.
    let clock: Clock
    var transfers: [TransferID: LoaderState.Transfer] = [:]
    /// Reads waiting for bytes, by wait number.
    private(set) var waits: [Int: LoaderState.Wait] = [:]
    private var nextWait = 0
    /// Long transfers that gave their connection up (`FetchError.yielded`),
    /// by owner: the owner's next cached read reads ahead again at once,
    /// as it would have let the transfer go on.
    var yielded: Set<ObjectIdentifier> = []
    /// Bumped each time the cache stops every transfer (purge, change), so
    /// a read does not count those as the server's failures.
    private(set) var stops = 0
    private(set) var lastError: MediaError?
    private(set) var lastErrorAt = 0.0
    /// When the next transfer may start: a failing server is retried with
    /// backoff, or when its Retry-After says.
    var retryAt = 0.0
    var failuresInARow = 0
    /// Whether a failure of this file was logged since its last transfer
    /// that got every byte it asked for: a server down is one log line per
    /// file, not one per read and retry (the rest go to debug).
    var outageLogged = false
    /// After a read gave up, reads fail at once until then, so the kernel's
    /// own retries of a failed read do not each wait through the backoff.
    var unavailableUntil = 0.0

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

    /// Bytes arrived for a waiting read, copied into its buffer.
    mutating func filled(_ number: Int, _ range: Range<Int64>) { waits[number]?.filled.insert(range) }

    /// Whether a read waits on bytes of `range`.
    func isWaitedOn(_ range: Range<Int64>) -> Bool {
        waits.values.contains(where: { $0.range.overlaps(range) })
    }
}
