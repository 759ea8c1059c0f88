// One line per notable event. Goes to stderr in the foreground and to syslog
// once the daemon has detached (stderr is /dev/null then).
import CCurl
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

package enum Log {
    package enum Level: Int, Sendable { case error = 0, warning, info, debug }

    package enum Sink: Sendable { case stderr, syslog }

    nonisolated(unsafe) private static var level: Level = .info
    /// Whether lines go to syslog: atomic, since the daemon switches to it
    /// once mounted (`detachToSyslog`), while its other threads log.
    private static let toSyslog = Atomic<Bool>(false)
    /// The lines written while a test captures them (`capturing`), else nil.
    private static let captured = Locked<[(level: Level, message: String)]?>(nil, rank: .log)

    /// Set once at start-up, before any other thread runs.
    package static func configure(level: Level, sink: Sink) {
        Log.level = level
        if sink == .syslog { detachToSyslog() }
    }

    /// From now on, lines go to syslog (the daemon's stderr is about to
    /// become /dev/null). Safe while other threads log.
    package static func detachToSyslog() {
        openlog("mediafs", LOG_PID, LOG_DAEMON)
        toSyslog.store(true, ordering: .releasing)
    }

    package static var isDebug: Bool { level == .debug }

    package static func error(_ message: @autoclosure () -> String) { write(.error, message()) }
    package static func warning(_ message: @autoclosure () -> String) { write(.warning, message()) }
    package static func info(_ message: @autoclosure () -> String) { write(.info, message()) }
    package static func debug(_ message: @autoclosure () -> String) {
        if level == .debug { write(.debug, message()) }
    }

    /// Runs `body` and returns the lines written meanwhile, from any
    /// thread, which still go to the sink too: how a test hears what was
    /// said. Captures do not nest.
    package static func capturing(_ body: () throws -> Void) rethrows -> [(level: Level, message: String)] {
        captured.withLock { $0 = [] }
        defer { captured.withLock { $0 = nil } }
        try body()
        return captured.withLock { $0 ?? [] }
    }

    private static func write(_ l: Level, _ message: String) {
        guard l.rawValue <= level.rawValue else { return }
        captured.withLock { $0?.append((l, message)) }
        switch toSyslog.load(ordering: .acquiring) ? Sink.syslog : Sink.stderr {
        case .stderr:
            let tag = ["error", "warning", "info", "debug"][l.rawValue]
            let line = "mediafs: \(tag): \(message)\n"
            var bytes = Array(line.utf8)
            _ = bytes.withUnsafeMutableBytes { Glibc.write(2, $0.baseAddress, $0.count) }
        case .syslog:
            let priority = [LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG][l.rawValue]
            mediafs_syslog(priority, message)
        }
    }
}
