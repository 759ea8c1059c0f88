// What one process read of one file and what the network fetched for it,
// from its first open of the file to its last close: a row of
// `status --readers`. Counted without a lock (reads and transfers add to
// it from many threads); its open handles say whether it is live.
import Synchronization

public final class ReaderAccount: Sendable {
    public let process: ReaderProcess
    public let readClass: ReadClass
    /// The file's path in the mount.
    public let file: String
    /// Wall time of its first open.
    public let since: Double
    /// The rule that named its class (nil: by name, arguments, or none).
    public let rule: String?

    private let read = Atomic<Int64>(0)
    private let fetched = Atomic<Int64>(0)
    private let handles = Atomic<Int>(0)
    private let refused = Atomic<Bool>(false)
    private let kernel = Atomic<Bool>(false)
    /// Wall time of its last close (while no handle is open), else 0.
    private let ended = Atomic<UInt64>(0)

    init(process: ReaderProcess, readClass: ReadClass, file: String, since: Double, rule: String? = nil) {
        self.process = process
        self.readClass = readClass
        self.file = file
        self.since = since
        self.rule = rule
    }

    public var bytesRead: Int64 { read.load(ordering: .relaxed) }
    public var bytesFetched: Int64 { fetched.load(ordering: .relaxed) }
    public var openHandles: Int { handles.load(ordering: .relaxed) }
    /// When its last handle closed; nil while one is open.
    public var endedAt: Double? {
        openHandles > 0 ? nil : Double(bitPattern: ended.load(ordering: .relaxed))
    }

    /// Bytes a read of its handed to it.
    public func countRead(_ count: Int64) { read.add(count, ordering: .relaxed) }
    /// Bytes a transfer its reads started brought from the network.
    public func countFetched(_ count: Int64) { fetched.add(count, ordering: .relaxed) }

    /// Whether the kernel read one of its handles itself (passthrough):
    /// those bytes never reach the daemon, so `bytesRead` is a floor.
    public var kernelReads: Bool { kernel.load(ordering: .relaxed) }
    /// One of its handles is read by the kernel itself.
    public func readByKernel() { kernel.store(true, ordering: .relaxed) }

    /// True the first time a read of its was refused for a budget: the
    /// log says so once per process and file.
    public func firstRefusal() -> Bool {
        !refused.exchange(true, ordering: .relaxed)
    }

    func opened() { handles.add(1, ordering: .relaxed) }

    /// Returns whether that was its last handle.
    func closed(at now: Double) -> Bool {
        ended.store(now.bitPattern, ordering: .relaxed)
        return handles.subtract(1, ordering: .relaxed).newValue == 0
    }

    /// Who it is and what it reads, for the log.
    var described: String {
        "\(process.name) (pid \(process.pid)" + (process.parentName.isEmpty ? "" : ", parent \(process.parentName)")
            + ") reading \(file)"
    }

    /// Bytes read a second over its life: to its last close, or to `now`.
    public func rate(now: Double) -> Double {
        let seconds = (endedAt ?? now) - since
        return seconds > 0 ? Double(bytesRead) / seconds : 0
    }
}
