// The mount's life: the catalog first (loading a large cache's records takes
// seconds, and no mount exists meanwhile for an access to block on), then
// libfuse's order: new, mount, signal handlers, loop; then unwound in
// reverse. The process never forks (the command starts the daemon anew,
// DaemonStart), so threads may run from the start; all are joined after the
// loop, before `fuse_destroy`.
import CFuse
import Foundation
import MediaCache
import MediaStore
import MediaSupport
#if canImport(Glibc)
import Glibc
#endif

public final class MediaFS: @unchecked Sendable {
    public struct Options: Sendable {
        public var mountpoint: String
        /// Called once the mount is up, just before requests are served:
        /// a daemon lets go of its terminal there and tells its starter.
        public var onMounted: (@Sendable () -> Void)?
        /// Called once the kernel has let go, before the final flush.
        public var onUnmounted: (@Sendable () -> Void)?
        /// Extra `-o` options for FUSE, each "key" or "key=value".
        public var fuseOptions: [String] = []
        /// Max threads serving FUSE requests. A read waiting for bytes holds
        /// one for up to `--timeout`: at 16, reads waiting on one stalled
        /// origin could take them all (once the kernel sends that many,
        /// `kernelReadsAtOnce`), and then no lookup or stat of any file was
        /// answered until they timed out. libfuse starts a thread only when
        /// none is free, so the pool grows with what waits (decision 0023).
        public var maxThreads: UInt32 = 256
        /// Threads kept once idle: past this many, a thread ends after its
        /// request, so the hundreds a stall started do not stay for the
        /// mount's life.
        public var idleThreads: UInt32 = 16
        /// Let the kernel read complete files from the cache itself (FUSE
        /// passthrough) where it and the privileges allow.
        public var passthrough = true
        /// `--metrics` and `--rc`: the listeners of the status page, the
        /// metrics and the remote control, bound before mounting, served
        /// from the daemon (one when both name one address).
        public var listeners: [AdminListener] = []
        /// `--scanners`: the process names whose opens are library scans
        /// (none: every open is a player's).
        public var scanners = ProcessClassifier.defaultScanners
        /// `--reader-class`: the user's rules, asked before the defaults.
        public var readerRules: [ReaderRule] = []

        public init(mountpoint: String) {
            self.mountpoint = mountpoint
        }
    }

    /// The FUSE read size the kernel is asked to use (`read_ahead_kb` of the mount).
    static let kernelReadaheadKB = 128

    /// Reads the kernel sends at once (its `max_background`): reads, cached
    /// or not, and readahead queue in the kernel behind this many, so at
    /// its default of 12, 12 reads waiting on a stalled origin held every
    /// read of the mount however many threads were free. A quarter of the
    /// threads stays out of its reach: lookups, stats and opens are sent
    /// outside that count, one per caller, and need a free thread too.
    var kernelReadsAtOnce: UInt32 { options.maxThreads - options.maxThreads / 4 }

    let owner = (uid: getuid(), gid: getgid())
    /// Directories show the mount's start as their times.
    let mountedAt: time_t
    /// The mount's clock: its waits are timed on it.
    let clock: Clock
    private let options: Options
    /// The class of the process behind each open.
    let classifier: ProcessClassifier
    /// Dropped once run: what it holds (the parsed sources of a list of
    /// 100,000 URLs, 4 MiB) is the catalog's now.
    private var makeCatalog: (() -> Catalog)?
    private var started: Catalog?
    private let readaheadRaised = Locked(false)
    private var fuse: OpaquePointer?
    private let passthroughState = Locked<(checked: Bool, value: Passthrough?)>((false, nil))
    /// Sends the kernel its invalidations: one thread, stopped before the
    /// session is destroyed, so none touches `struct fuse` after.
    private let invalidations = Worker(name: "mediafs-invalidate")
    /// Whether notifications may reach the session: closed, under this
    /// lock, once the loop has ended and before the session is unmounted,
    /// so none is written to its descriptor once closed (and perhaps reused
    /// by another open).
    private let notifying = Locked(true)

    /// The mount's passthrough, known from the first open on (after INIT).
    var passthrough: Passthrough? {
        passthroughState.withLock { state in
            if !state.checked, let fuse {
                state = (true, Passthrough.negotiatedFor(session: fuse_get_session(fuse), clock: clock))
            }
            return state.value
        }
    }

    var catalog: Catalog { started! }

    /// `makeCatalog` runs first in `run`, before anything is mounted.
    public init(options: Options, clock: Clock, makeCatalog: @escaping () -> Catalog) {
        self.options = options
        self.clock = clock
        mountedAt = time_t(clock.wall())
        classifier = ProcessClassifier(scanners: options.scanners, rules: options.readerRules)
        self.makeCatalog = makeCatalog
    }

    /// Checks the mountpoint before anything is set up, for a clear error.
    public static func checkMountpoint(_ path: String) throws {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw MediaError(ENOENT, "mountpoint \(path) does not exist")
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw MediaError(ENOTDIR, "mountpoint \(path) is not a directory")
        }
        if MountTable.entry(at: path) != nil {
            throw MediaError(EBUSY, "mountpoint \(path) is already mounted")
        }
    }

    /// Whether a file system is mounted at `path` (the mount table says).
    public static func isMounted(at path: String) -> Bool {
        MountTable.entry(at: path) != nil
    }

    /// The same for a path already resolved, without touching it: what a
    /// cache lock's waiter asks of the holder's mountpoint.
    public static func isMounted(resolved path: String) -> Bool {
        MountTable.isMounted(at: path)
    }

    /// Mounts, serves until unmounted or signalled, and cleans up. Returns
    /// once the mount ends (in the daemon when not in the foreground).
    public func run() throws {
        // Not "ro": the kernel would refuse setxattr, which administers the
        // cache. Operations.swift answers EROFS to every write instead.
        let fuseOptions = (["fsname=mediafs", "subtype=mediafs", "default_permissions"]
                           + options.fuseOptions).joined(separator: ",")
        let words: [String] = ["mediafs", "-o", fuseOptions]
        let argv: [UnsafeMutablePointer<CChar>] = words.map { strdup($0)! }
        defer { argv.forEach { free($0) } }
        var cArgv: [UnsafeMutablePointer<CChar>?] = argv.map { $0 } + [nil]
        var fuseArgs = fuse_args(argc: Int32(argv.count), argv: nil, allocated: 0)

        // Made before mounting: the kernel queues every access to a mount
        // until its loop answers, so a catalog loaded after it held every
        // stat of the mount for as long as it took.
        let catalog = makeCatalog!()
        makeCatalog = nil
        started = catalog
        var serving = false
        defer { if !serving { catalog.stop() } }

        try cArgv.withUnsafeMutableBufferPointer { buffer in
            fuseArgs.argv = buffer.baseAddress
            var ops = makeOperations()
            let context = Unmanaged.passUnretained(self).toOpaque()
            guard let fuse = mediafs_fuse_new(&fuseArgs, &ops, MemoryLayout<fuse_operations>.size, context) else {
                throw MediaError(EINVAL, "cannot set up FUSE with options '\(fuseOptions)'")
            }
            self.fuse = fuse
            defer { self.fuse = nil; fuse_destroy(fuse) }
            guard fuse_mount(fuse, options.mountpoint) == 0 else {
                throw MediaError(EIO, "cannot mount at \(options.mountpoint)")
            }
            defer { fuse_unmount(fuse) }
            // In the foreground: it only changes to "/", as a daemon does.
            _ = fuse_daemonize(1)
            let session = fuse_get_session(fuse)
            guard fuse_set_signal_handlers(session) == 0 else {
                throw MediaError(EIO, "cannot install signal handlers")
            }
            defer { fuse_remove_signal_handlers(session) }
            if options.passthrough { Passthrough.install(on: session!) }

            serving = true
            catalog.start(onChange: { [weak self] url, done in self?.invalidate(urls: [url], then: done) ?? false },
                          names: NameTeller(tell: { [weak self] names in self?.tell(names) },
                                            waitUntilTold: { [weak self] in self?.waitUntilTold() }))
            for listener in options.listeners { listener.start(serving: catalog) }
            Log.info("mounted " + (catalog.rootListingURL ?? "\(catalog.names.count) sources")
                     + " at \(options.mountpoint)")
            options.onMounted?()

            let loopConfig = fuse_loop_cfg_create()
            defer { fuse_loop_cfg_destroy(loopConfig) }
            fuse_loop_cfg_set_max_threads(loopConfig, options.maxThreads)
            fuse_loop_cfg_set_idle_threads(loopConfig, options.idleThreads)
            let status = mediafs_fuse_loop_mt(fuse, loopConfig)
            Log.info("unmounting \(options.mountpoint)")
            options.onUnmounted?()
            // Nothing may reach `fuse` once it is destroyed: the kernel has
            // let go, so pending invalidations are moot; then every other
            // thread is joined and the metadata persisted. The session is
            // unmounted first (the deferred call then does nothing): a job
            // asking the kernel a node id may wait on a lookup no thread
            // serves now (a loop ended by a signal), until the connection
            // ends.
            notifying.withLock { $0 = false }
            fuse_unmount(fuse)
            invalidations.stop(drain: false)
            for listener in options.listeners { listener.stop() }
            catalog.stop()
            if status != 0 && status != -EINTR && status != SIGINT && status != SIGTERM {
                Log.warning("FUSE loop ended with status \(status)")
            }
        }
    }

    /// How long a purge waits for the kernel to drop its pages.
    static let invalidationWait = 2.0

    /// Drops the kernel's page cache and attributes of files whose cached
    /// bytes are gone. Sent from another thread, since a notification sent
    /// from inside a request on the same inode could wait on that request;
    /// with `wait`, returns once it is done (bounded), so that a read right
    /// after a purge cannot be answered from the old pages.
    func invalidate(_ paths: [String], wait: Bool = false) {
        invalidate(wait: wait) { paths }
    }

    /// The same for every name of `urls` (a URL may be mounted under
    /// several, each its own inode), resolved when the job runs. `done`
    /// hears whether the kernel dropped every one; returns whether the job
    /// was queued (not once the mount is stopping).
    @discardableResult
    func invalidate(urls: [String], wait: Bool = false, then done: (@Sendable (Bool) -> Void)? = nil) -> Bool {
        invalidate(wait: wait, then: done) { [weak self] in self?.started?.paths(of: Set(urls)) ?? [] }
    }

    @discardableResult
    private func invalidate(wait: Bool, then done: (@Sendable (Bool) -> Void)? = nil,
                            paths: @escaping @Sendable () -> [String]) -> Bool {
        guard let fuse else { return false }
        let address = UInt(bitPattern: fuse)
        let finished = OneShot<Bool>()
        let queued = invalidations.submit {
            let fuse = OpaquePointer(bitPattern: address)
            var dropped = true
            for path in paths() {
                let absolute = path.hasPrefix("/") ? path : "/" + path
                guard let status = self.notify(fuse, { fuse_invalidate_path($0, absolute) }) else { break }
                // ENOENT: the kernel holds no inode of that name, so no page.
                if status != 0 && status != -ENOENT {
                    dropped = false
                    Log.warning("the kernel did not drop its pages of \(path): \(String(cString: strerror(-status)))")
                }
            }
            done?(dropped)
            finished.fulfil(dropped)
        }
        guard queued else { return false }
        if wait && finished.wait(until: Deadline.after(seconds: Self.invalidationWait, clock: clock)) == nil {
            Log.warning("the kernel took over \(Self.invalidationWait) s to drop its cached pages")
        }
        return true
    }

    /// Tells the kernel of a relisted directory's names (decision 0051),
    /// so the next stat or lookup sees them as they are: every name's
    /// entry is dropped (an added one it may hold as missing for
    /// `negative_timeout`), and a changed name's attributes and pages
    /// (`fuse_invalidate_path`). Not a removed name's: with its entry gone
    /// no lookup finds it, and its attributes stay with the handles still
    /// open on it (fstat asks them by name, which would fail). Queued like
    /// every invalidation; quiet where the kernel holds nothing of a name.
    func tell(_ names: NameChanges) {
        guard let fuse else { return }
        let address = UInt(bitPattern: fuse)
        let (mountpoint, statistics) = (options.mountpoint, catalog.statistics)
        invalidations.submit { [self] in
            let fuse = OpaquePointer(bitPattern: address)
            // Asking the node id walks the mount: not once the loop has ended.
            guard notifying.withLock({ $0 }) else { return }
            let parent: UInt64
            switch KernelNode.id(of: names.directory, under: mountpoint) {
            case .success(let id): parent = id
            case .failure(let error):
                // The directory went, or the mount is going: nothing to drop.
                return Log.debug("no kernel entries of \(names.directory) invalidated: \(error.message)")
            }
            let changed = Set(names.changed)
            for name in names.removed + names.changed + names.added {
                let path = names.directory + "/" + name
                if changed.contains(name) {
                    guard let status = notify(fuse, { fuse_invalidate_path($0, path) }) else { return }
                    if status != 0 && status != -ENOENT {
                        Log.warning("the kernel did not drop its attributes of \(path): "
                                    + String(cString: strerror(-status)))
                    }
                }
                let sent = notify(fuse) { fuse in
                    name.withCString { fuse_lowlevel_notify_inval_entry(fuse_get_session(fuse), parent, $0,
                                                                        name.utf8.count) }
                }
                guard let status = sent else { return }
                statistics.countEntryNotification()
                // ENOENT: the kernel holds no entry of that name.
                if status != 0 && status != -ENOENT {
                    Log.warning("the kernel did not drop its entry of \(path): " + String(cString: strerror(-status)))
                }
            }
        }
    }

    /// Returns once the invalidations queued before it are sent: its own
    /// job runs after them, on the same worker (bounded, as a purge's).
    func waitUntilTold() {
        let done = OneShot<Bool>()
        guard invalidations.submit({ done.fulfil(true) }) else { return }
        if done.wait(until: Deadline.after(seconds: Self.invalidationWait, clock: clock)) == nil {
            Log.warning("the kernel took over \(Self.invalidationWait) s to hear of changed names")
        }
    }

    /// Sends one notification through `fuse`, unless the loop has ended
    /// (nil then).
    private func notify(_ fuse: OpaquePointer?, _ send: (OpaquePointer?) -> Int32) -> Int32? {
        notifying.withLock { open in open ? send(fuse) : nil }
    }

    /// Called from `destroy`: the last chance to persist metadata.
    func stop() {
        started?.stop()
    }

    /// Holds the kernel's window at 128 KiB (the usual default) where the
    /// system set it larger: the kernel asks for its next window as soon as
    /// the player enters the current one, so a larger one fetches more past
    /// where a player seeks away (decision 0017). Best effort: only root can
    /// write it. Called from the first getattr (a lookup before any open
    /// comes there) and open: the kernel resets the value when it processes
    /// INIT's reply, which any later request waits for, and sets a file's
    /// readahead up at open. Not in the open itself: it reads the mount
    /// table and writes sysfs, a cost a cold read should not pay.
    func pinKernelReadaheadOnce() {
        let first = readaheadRaised.withLock { done in
            defer { done = true }
            return !done
        }
        guard first else { return }
        guard let device = MountTable.entry(at: options.mountpoint)?.device else { return }
        let path = "/sys/class/bdi/\(device)/read_ahead_kb"
        let fd = open(path, O_WRONLY)
        guard fd >= 0 else { return Log.debug("cannot open \(path)") }
        let value = Array("\(Self.kernelReadaheadKB)\n".utf8)
        do {
            try FileIO.writeFully(fd: fd, from: value, at: 0)
        } catch {
            Log.debug("cannot write \(path): \(error)")
        }
        close(fd)
    }
}
