// Counters for the whole mount, shown by the root's `user.mediafs.stats`
// and by `--metrics`. Atomics, since every reader and the network thread
// bump them; the histograms take one short lock per observation.
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

public final class Statistics: Sendable {
    package let bytesFromCache = Atomic<Int64>(0)
    package let bytesFromNetwork = Atomic<Int64>(0)
    package let requests = Atomic<Int64>(0)
    package let transfersInFlight = Atomic<Int64>(0)
    /// What the kernel asked of the daemon: opens whose reads it serves
    /// from the cache itself (passthrough), and stats (getattr) rather than
    /// answering from what a lookup or readdirplus gave it.
    private let kernel = KernelCounts()
    /// Transfers started again for bytes an earlier one failed to bring.
    package let retries = Atomic<Int64>(0)
    /// Cache entries the limits removed.
    package let evictions = Atomic<Int64>(0)
    /// Opens that went on with a closed handle's pattern and transfers
    /// (`--handle-grace`).
    package let graceResumes = Atomic<Int64>(0)
    /// Long transfers, held at their reader's window, that gave their
    /// connection to a read waiting for one at their origin.
    package let transfersYielded = Atomic<Int64>(0)
    /// A library scan's reads that waited for a place at their origin
    /// while players' reads or readahead ran or waited there, and the
    /// requests the container lookahead sent (an MP4's moov, a Matroska
    /// file's Cues, a TS tail): what probing costs.
    package let probing = ProbingCounts()
    /// File bytes received from the servers and handed to readers, by read
    /// class (MediaCache's ReadClass: 0 play, 1 scan).
    package static let readClasses = 2
    private let fetchedByClass = ClassBytes()
    private let servedByClass = ClassBytes()
    /// HTTP responses by status class, and hops that ended without one.
    private let responses = Locked([Int64](repeating: 0, count: ResponseClass.allCases.count))
    /// How long FUSE reads took, from the call to the bytes in the buffer,
    /// and how long learning a file's length and validators took.
    package let timings: Timings
    private let writePause: CacheWritePause
    /// After a failed cache write, reads pass through for this long.
    package static var passThroughSeconds: Int64 { CacheWritePause.seconds }

    package init(clock: Clock) {
        timings = Timings(clock: clock)
        writePause = CacheWritePause(clock: clock)
    }

    /// Whether arriving bytes should be written into the cache now.
    package var cacheWritable: Bool { writePause.isOver }

    /// A cache write failed (disk full, I/O error): say so once, then serve
    /// from the network alone for a while.
    package func cacheWriteFailed(_ error: MediaError) { writePause.failed(error) }

    /// A file was opened for the kernel to read from the cache itself.
    package func countKernelReadOpen() {
        kernel.readOpens.add(1, ordering: .relaxed)
    }

    package func countAttributeRequest() {
        kernel.attributeRequests.add(1, ordering: .relaxed)
    }

    /// The kernel was told to drop its entry of a name a relisting added,
    /// removed or changed (tests count these, not times).
    package func countEntryNotification() {
        kernel.entryNotifications.add(1, ordering: .relaxed)
    }

    /// A transfer (or probe) was started again after a failure.
    package func countRetry() {
        retries.add(1, ordering: .relaxed)
    }

    package func countEvictions(_ count: Int) {
        evictions.add(Int64(count), ordering: .relaxed)
    }

    package func countFetched(_ count: Int64, byClass index: Int) {
        fetchedByClass.add(count, byClass: index)
    }

    package func countServed(_ count: Int64, byClass index: Int) {
        servedByClass.add(count, byClass: index)
    }

    package enum ResponseClass: Int, CaseIterable, Sendable {
        case success, redirect, clientError, serverError, error

        /// The label Prometheus shows: "2xx" … "5xx", or "error" for a hop
        /// that got no status (connection refused, reset, timeout).
        package var label: String { ["2xx", "3xx", "4xx", "5xx", "error"][rawValue] }

        /// The class of an HTTP status; a status outside 200-599 counts as an error.
        package init(status: Int) {
            switch status {
            case 200..<300: self = .success
            case 300..<400: self = .redirect
            case 400..<500: self = .clientError
            case 500..<600: self = .serverError
            default: self = .error
            }
        }
    }

    package func countResponse(_ kind: ResponseClass) {
        responses.withLock { $0[kind.rawValue] &+= 1 }
    }

    package struct Snapshot: Sendable, Equatable {
        package var bytesFromCache: Int64
        package var bytesFromNetwork: Int64
        package var requests: Int64
        package var transfersInFlight: Int64
        package var kernelReadOpens: Int64
        package var attributeRequests: Int64 = 0
        package var kernelEntryNotifications: Int64 = 0
        package var retries: Int64 = 0
        package var evictions: Int64 = 0
        package var graceResumes: Int64 = 0
        package var transfersYielded: Int64 = 0
        package var scanReadsDelayed: Int64 = 0
        package var lookaheadFetches: Int64 = 0
        package var streamsAhead: Int64 = 0
        /// By `ResponseClass.rawValue`.
        package var responses: [Int64] = []
        /// By read class (0 play, 1 scan).
        package var fetchedByClass = [Int64](repeating: 0, count: ClassBytes.classes)
        package var servedByClass = [Int64](repeating: 0, count: ClassBytes.classes)
    }

    package var snapshot: Snapshot {
        Snapshot(bytesFromCache: bytesFromCache.load(ordering: .relaxed),
                 bytesFromNetwork: bytesFromNetwork.load(ordering: .relaxed),
                 requests: requests.load(ordering: .relaxed),
                 transfersInFlight: transfersInFlight.load(ordering: .relaxed),
                 kernelReadOpens: kernel.readOpens.load(ordering: .relaxed),
                 attributeRequests: kernel.attributeRequests.load(ordering: .relaxed),
                 kernelEntryNotifications: kernel.entryNotifications.load(ordering: .relaxed),
                 retries: retries.load(ordering: .relaxed),
                 evictions: evictions.load(ordering: .relaxed),
                 graceResumes: graceResumes.load(ordering: .relaxed),
                 transfersYielded: transfersYielded.load(ordering: .relaxed),
                 scanReadsDelayed: probing.scanReadsDelayed.load(ordering: .relaxed),
                 lookaheadFetches: probing.lookaheadFetches.load(ordering: .relaxed),
                 streamsAhead: probing.streamsAhead.load(ordering: .relaxed),
                 responses: responses.withLock { $0 },
                 fetchedByClass: fetchedByClass.values, servedByClass: servedByClass.values)
    }
}

