// How `mediafs mount` without `-f` becomes a daemon: not by fork. The Swift
// runtime caches each thread's id for its locks (swift_once, Mutex use
// futex PI locks that store the owner's tid); a forked child's main thread
// keeps its parent's cached id, so the first swift_once it contends with
// another thread for never ends: its unlock names a thread that is gone.
// That was the remount hang: a big catalog loaded on several threads right
// after fuse_daemonize's fork (decision 0024). So the command starts this
// same executable again (`posix_spawn`, a new process image), in the
// foreground and a session of its own, and waits until it says it is
// mounted; the daemon then lets go of the terminal.
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import MediaCache
import MediaSupport
import MediaFS

enum DaemonStart {
    /// Set in the daemon's environment: the descriptor it reports on.
    static let readyVariable = "MEDIAFS_DAEMON_READY_FD"
    /// What the daemon writes once mounted.
    static let readyByte: UInt8 = 0x52

    /// In the daemon: the descriptor to report readiness on, taken out of
    /// the environment (so nothing it starts inherits it); nil in the command.
    static func takeReadyDescriptor() -> Int32? {
        guard let text = ProcessInfo.processInfo.environment[readyVariable] else { return nil }
        unsetenv(readyVariable)
        guard let fd = Int32(text), fd > 2, fcntl(fd, F_GETFD) >= 0 else {
            Log.warning("ignoring \(readyVariable)=\(text): not an open descriptor")
            return nil
        }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        // A session of its own: the terminal's hangup does not reach it.
        _ = setsid()
        return fd
    }

    /// In the daemon, once mounted: logs go to syslog, the standard
    /// descriptors to /dev/null, and the waiting command is told.
    static func detach(readyDescriptor fd: Int32) {
        Log.detachToSyslog()
        let null = open("/dev/null", O_RDWR | O_CLOEXEC)
        if null >= 0 {
            for target: Int32 in 0...2 { _ = dup2(null, target) }
            close(null)
        }
        var byte = readyByte
        _ = write(fd, &byte, 1)
        close(fd)
    }

    /// In the command: starts the daemon with the same arguments and
    /// returns its fate: 0 once it is mounted; its own status when it
    /// exits first (its error went to this stderr, which it shares until
    /// mounted); 1 when it is not mounted within `timeout`, after stopping
    /// it and undoing any mount it made.
    static func spawnAndWait(arguments: [String], mountpoint: String, timeout: Double) -> Int32 {
        var pipeEnds: [Int32] = [-1, -1]
        guard pipe(&pipeEnds) == 0 else {
            Log.error("cannot start the daemon: pipe: \(String(cString: strerror(errno)))")
            return 1
        }
        let (reading, writing) = (pipeEnds[0], pipeEnds[1])
        // No other thread runs here, so none can spawn between pipe and this.
        _ = fcntl(reading, F_SETFD, FD_CLOEXEC)
        _ = fcntl(writing, F_SETFD, FD_CLOEXEC)
        defer { close(reading) }
        // The write end is the daemon's: dup2 onto itself in the file
        // actions clears close-on-exec there only.
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, writing, writing)

        var environment = ProcessInfo.processInfo.environment
        environment[readyVariable] = String(writing)
        // Passwords in URLs: the daemon's command line shows them masked,
        // and it reads the real arguments from a pipe (ProgramArguments).
        let shown = ProgramArguments.shown(arguments)
        var secrets: (read: Int32, write: Int32)?
        if shown != arguments {
            var ends: [Int32] = [-1, -1]
            guard pipe(&ends) == 0 else {
                Log.error("cannot start the daemon: pipe: \(String(cString: strerror(errno)))")
                close(writing)
                return 1
            }
            _ = fcntl(ends[0], F_SETFD, FD_CLOEXEC)
            _ = fcntl(ends[1], F_SETFD, FD_CLOEXEC)
            posix_spawn_file_actions_adddup2(&actions, ends[0], ends[0])
            environment[ProgramArguments.pipeVariable] = String(ends[0])
            secrets = (ends[0], ends[1])
        }
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { envp.forEach { free($0) } }
        let executable = "/proc/self/exe"
        let argv = ([CommandLine.arguments.first ?? "mediafs"] + shown).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }

        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, envp)
        close(writing)
        if let secrets {
            close(secrets.read)
            if spawned == 0 {
                // A daemon that died before reading must not take this process with SIGPIPE.
                signal(SIGPIPE, SIG_IGN)
                var bytes: [UInt8] = arguments.flatMap { Array($0.utf8) + [UInt8(0)] }
                var sent = 0
                while sent < bytes.count {
                    let count = bytes[sent...].withUnsafeMutableBytes { write(secrets.write, $0.baseAddress, $0.count) }
                    if count < 0 && errno == EINTR { continue }
                    guard count > 0 else { break }
                    sent += count
                }
                bytes.removeAll()
            }
            close(secrets.write)
        }
        guard spawned == 0 else {
            Log.error("cannot start the daemon: \(String(cString: strerror(spawned)))")
            return 1
        }

        // The waiting parent's own clock: it mounts nothing itself.
        let clock = Clock.system
        let deadline = Deadline.after(seconds: timeout, clock: clock)
        while true {
            var poller = pollfd(fd: reading, events: Int16(POLLIN), revents: 0)
            let left = deadline.remaining
            let ready = poll(&poller, 1, Int32(min(left * 1000, 1_000)))
            if ready < 0 && errno == EINTR { continue }
            if ready > 0 {
                var byte: UInt8 = 0
                let count = read(reading, &byte, 1)
                if count < 0 && errno == EINTR { continue }
                if count == 1 && byte == readyByte { return 0 }
                // The daemon ended before it was mounted: it said why.
                return exitStatus(of: pid)
            }
            if ready == 0 && deadline.hasPassed { break }
        }
        Log.error("the mount at \(mountpoint) was not ready within \(timeout) s "
                  + "(--timeout); stopping it")
        kill(pid, SIGTERM)
        let stopBy = Deadline.after(seconds: 5, clock: clock)
        var status: Int32 = 0
        while waitpid(pid, &status, WNOHANG) == 0 {
            if stopBy.hasPassed {
                kill(pid, SIGKILL)
                _ = waitpid(pid, &status, 0)
                break
            }
            usleep(20_000)
        }
        // A daemon killed between mounting and reporting leaves its mount.
        if MediaFS.isMounted(at: mountpoint) {
            _ = unmountLazily(mountpoint)
        }
        return 1
    }

    private static func exitStatus(of pid: pid_t) -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let signal = status & 0x7f
        if signal != 0 {
            Log.error("the daemon was killed by signal \(signal) before it was mounted")
            return 1
        }
        let code = (status >> 8) & 0xff
        return code == 0 ? 1 : code
    }

    /// `fusermount3 -u -z MOUNTPOINT`, waited for.
    private static func unmountLazily(_ mountpoint: String) -> Bool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/fusermount3")
        process.arguments = ["-u", "-z", mountpoint]
        do {
            try process.run()
            process.waitUntilExit()
            return process.terminationStatus == 0
        } catch {
            Log.warning("cannot unmount \(mountpoint): \(error)")
            return false
        }
    }
}
