// FUSE passthrough (Linux 6.9 and later): for a file whose bytes are all
// cached, the kernel reads the cache's data file itself, as fast as a local
// file and without a request to this daemon. libfuse 3.14 predates it, so
// two messages are amended on their way through libfuse's custom I/O hooks:
// the INIT reply accepts FUSE_PASSTHROUGH, and an OPEN reply names the
// backing file registered with the FUSE_DEV_IOC_BACKING_OPEN ioctl.
//
// The kernel insists that while a file has passthrough handles, every new
// open of it is passthrough to the same backing file, and that no handle of
// it is in page-cache mode at the same time. So a file is opened for
// passthrough only when no page-cache handle of it is open, and while it has
// passthrough handles, new opens reuse their backing file (purge and change
// never alter that file in place; see FileLoader+KernelReads.swift).
import CFuse
import Foundation
import MediaCache
import MediaSupport
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

final class Passthrough: Sendable {
    // The kernel's ABI (include/uapi/linux/fuse.h, protocol 7.40).
    private static let opcodeInit: UInt32 = 26
    private static let inHeaderSize = 40
    private static let initExtended: UInt32 = 1 << 30            // FUSE_INIT_EXT
    private static let passthroughFlag2: UInt32 = 1 << (37 - 32) // FUSE_PASSTHROUGH
    private static let openPassthrough: UInt32 = 1 << 7          // FOPEN_PASSTHROUGH
    private static let backingOpen: UInt = 0x4010_E501           // _IOW(229, 1, struct fuse_backing_map)
    private static let backingClose: UInt = 0x4004_E502          // _IOW(229, 2, uint32_t)

    /// A file's handles: the backing file its passthrough handles read,
    /// or how many handles read it through the page cache.
    private struct Handles {
        var backing: (id: Int32, version: Int, count: Int)?
        var cached = 0
    }

    /// What a passthrough handle holds: the backing file's id and version.
    struct Grant {
        let id: Int32
        let version: Int
    }

    /// How an open handle is read.
    enum Mode {
        /// The kernel reads the backing file itself.
        case passthrough(Grant)
        /// Reads come to the daemon, through the page cache.
        case cached
    }

    private static let offered = Atomic<Bool>(false)
    private static let initUnique = Atomic<UInt64>(0)
    private static let negotiated = Atomic<Bool>(false)
    /// The backing id the OPEN reply sent next from this thread carries.
    private static let pendingKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    private let deviceFD: Int32
    /// The mount's clock: an open's wait for a release is timed on it.
    private let clock: Clock
    /// Each loader's handles (taken before a loader's lock); signalled
    /// when a handle closes.
    private let files = ConditionLocked<[ObjectIdentifier: Handles]>([:], rank: .passthrough)
    /// The kernel sends RELEASE after close() has returned, so an open
    /// right after a close may arrive first: it waits this long for it.
    static let releaseWait = 0.005
    /// As long for the last handles of a data file since replaced (purged
    /// or changed): sharing it would serve the bytes the user just dropped.
    /// Longer, since the RELEASE may queue behind the kernel's background
    /// reads; past it the open shares the old file, whole and unmixed.
    static let staleReleaseWait = 0.05
    private let failed = Atomic<Bool>(false)

    private init(deviceFD: Int32, clock: Clock) {
        self.deviceFD = deviceFD
        self.clock = clock
    }

    /// Routes the session's messages through the hooks below. Only root
    /// may register backing files, so others keep libfuse's plain I/O.
    static func install(on session: OpaquePointer) {
        guard geteuid() == 0 else { return }
        var io = fuse_custom_io()
        io.read = { fd, buffer, size, _ in
            let count = read(fd, buffer, size)
            if count >= Passthrough.inHeaderSize + 20, let buffer { Passthrough.inspect(request: buffer) }
            return count
        }
        io.writev = { fd, vectors, count, _ in
            if let vectors, count >= 2 { Passthrough.amend(reply: vectors) }
            return writev(fd, vectors, count)
        }
        let fd = fuse_session_fd(session)
        if fuse_session_custom_io(session, &io, fd) != 0 {
            Log.warning("cannot hook FUSE messages: files are read through the daemon")
        }
    }

    /// The mount's passthrough, once the kernel has agreed to it.
    static func negotiatedFor(session: OpaquePointer, clock: Clock) -> Passthrough? {
        negotiated.load(ordering: .acquiring) ? Passthrough(deviceFD: fuse_session_fd(session), clock: clock) : nil
    }

    private static func inspect(request: UnsafeMutableRawPointer) {
        guard initUnique.load(ordering: .relaxed) == 0,
              request.loadUnaligned(fromByteOffset: 4, as: UInt32.self) == opcodeInit else { return }
        offered.store(offersPassthrough(initRequest: UnsafeRawPointer(request + inHeaderSize)), ordering: .relaxed)
        initUnique.store(request.loadUnaligned(fromByteOffset: 8, as: UInt64.self), ordering: .relaxed)
    }

    private static func amend(reply vectors: UnsafeMutablePointer<iovec>) {
        let pending = pthread_getspecific(pendingKey)
        if pending != nil { pthread_setspecific(pendingKey, nil) }
        guard let header = vectors[0].iov_base, vectors[0].iov_len >= 16, let body = vectors[1].iov_base,
              header.loadUnaligned(fromByteOffset: 4, as: Int32.self) == 0 else { return }
        if let pending {
            // fuse_open_out: fh u64, open_flags u32, backing_id s32.
            guard vectors[1].iov_len == 16 else { return }
            return amend(openReply: body, backingID: Int32(truncatingIfNeeded: Int(bitPattern: pending)))
        }
        let unique = header.loadUnaligned(fromByteOffset: 8, as: UInt64.self)
        guard unique != 0, unique == initUnique.load(ordering: .relaxed), !negotiated.load(ordering: .relaxed),
              offered.load(ordering: .relaxed), vectors[1].iov_len >= 40 else { return }
        amend(initReply: body)
        negotiated.store(true, ordering: .releasing)
    }

    /// Whether an INIT request's body (fuse_init_in: minor at 4, flags at
    /// 12, flags2 at 16) offers passthrough: protocol 7.40 or later, with
    /// the extended flags and FUSE_PASSTHROUGH among them.
    static func offersPassthrough(initRequest body: UnsafeRawPointer) -> Bool {
        let minor = body.loadUnaligned(fromByteOffset: 4, as: UInt32.self)
        let flags = body.loadUnaligned(fromByteOffset: 12, as: UInt32.self)
        let flags2 = body.loadUnaligned(fromByteOffset: 16, as: UInt32.self)
        return minor >= 40 && flags & initExtended != 0 && flags2 & passthroughFlag2 != 0
    }

    /// Accepts passthrough in an INIT reply's body (fuse_init_out, 40
    /// bytes at least: flags at 12, flags2 at 32, max_stack_depth at 36).
    static func amend(initReply body: UnsafeMutableRawPointer) {
        let flags = body.loadUnaligned(fromByteOffset: 12, as: UInt32.self)
        let flags2 = body.loadUnaligned(fromByteOffset: 32, as: UInt32.self)
        body.storeBytes(of: flags | initExtended, toByteOffset: 12, as: UInt32.self)
        body.storeBytes(of: flags2 | passthroughFlag2, toByteOffset: 32, as: UInt32.self)
        // Backing files on a plain filesystem; a cache on a stacked one
        // (overlayfs) is refused at open and read through the page cache.
        body.storeBytes(of: UInt32(1), toByteOffset: 36, as: UInt32.self)
    }

    /// Makes an OPEN reply's body (fuse_open_out, 16 bytes: fh u64,
    /// open_flags u32, backing_id s32) a passthrough open of `backingID`.
    static func amend(openReply body: UnsafeMutableRawPointer, backingID: Int32) {
        let flags = body.loadUnaligned(fromByteOffset: 8, as: UInt32.self)
        body.storeBytes(of: flags | openPassthrough, toByteOffset: 8, as: UInt32.self)
        body.storeBytes(of: backingID, toByteOffset: 12, as: Int32.self)
    }

    /// Chooses the mode of a new handle of `loader`'s file; give it back
    /// with `close` at release.
    func open(_ loader: FileLoader) -> Mode {
        let key = ObjectIdentifier(loader)
        return files.withScope { files in
            if (files.state[key]?.cached ?? 0) > 0, !failed.load(ordering: .relaxed), loader.usage().isComplete {
                let deadline = Deadline.after(seconds: Self.releaseWait, clock: clock)
                while (files.state[key]?.cached ?? 0) > 0 && files.wait(until: deadline) {}
            }
            if let backing = files.state[key]?.backing, !loader.isCurrentData(version: backing.version) {
                let deadline = Deadline.after(seconds: Self.staleReleaseWait, clock: clock)
                while let current = files.state[key]?.backing, current.id == backing.id, files.wait(until: deadline) {}
            }
            var handles = files.state[key] ?? Handles()
            defer { files.state[key] = handles }
            if var backing = handles.backing {
                // Handles still read this backing file: the kernel allows no
                // other, and its bytes are the ones they opened.
                backing.count += 1
                handles.backing = backing
                return .passthrough(Grant(id: backing.id, version: backing.version))
            }
            guard handles.cached == 0, !failed.load(ordering: .relaxed),
                  let (fd, version) = loader.beginKernelReads() else {
                handles.cached += 1
                return .cached
            }
            defer { Glibc.close(fd) }
            // struct fuse_backing_map: fd s32, flags u32, padding u64.
            var map: (Int32, UInt32, UInt64) = (fd, 0, 0)
            let id = mediafs_ioctl(deviceFD, Self.backingOpen, &map)
            guard id > 0 else {
                let reason = String(cString: strerror(errno))
                loader.endKernelReads(version: version)
                if !failed.exchange(true, ordering: .relaxed) {
                    Log.warning("FUSE passthrough unavailable (\(reason)): cached files are read through the daemon")
                }
                handles.cached += 1
                return .cached
            }
            handles.backing = (id, version, 1)
            return .passthrough(Grant(id: id, version: version))
        }
    }

    /// A handle opened in `mode` closed. Returns true when it was the last
    /// page-cache handle of a complete file: its next open is passthrough,
    /// and that open would drop the file's pages from the FUSE page cache
    /// itself, at the reader's expense, unless they are dropped before.
    @discardableResult
    func close(_ mode: Mode, of loader: FileLoader) -> Bool {
        let key = ObjectIdentifier(loader)
        return files.withScope { files in
            guard var handles = files.state[key] else { return false }
            var lastCached = false
            switch mode {
            case .cached:
                handles.cached -= 1
                files.broadcast()
                lastCached = handles.cached == 0 && handles.backing == nil && !failed.load(ordering: .relaxed)
                    && loader.usage().isComplete
            case .passthrough(let grant):
                if var backing = handles.backing, backing.id == grant.id {
                    backing.count -= 1
                    if backing.count > 0 {
                        handles.backing = backing
                    } else {
                        handles.backing = nil
                        files.broadcast()
                        var id = UInt32(bitPattern: backing.id)
                        _ = mediafs_ioctl(deviceFD, Self.backingClose, &id)
                        // Under the lock: a passthrough open right after must
                        // find the loader's bookkeeping already ended, or this
                        // would end the new backing's instead.
                        loader.endKernelReads(version: backing.version)
                    }
                }
            }
            files.state[key] = handles.backing == nil && handles.cached == 0 ? nil : handles
            return lastCached
        }
    }

    /// Marks the OPEN reply this thread sends next as passthrough to `grant`.
    static func amendNextOpenReply(_ grant: Grant) {
        pthread_setspecific(pendingKey, UnsafeRawPointer(bitPattern: Int(grant.id)))
    }
}
