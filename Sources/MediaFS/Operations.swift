// The FUSE operation table. Each callback converts C arguments, calls the
// catalog, and converts the result or error to a reply. No policy here: how
// an open is served, for one, is the core's answer (`Catalog.open`). The
// conversions are small functions of their own, which need no FUSE request
// (MediaFSTests).
import CFuse
import MediaCache
import MediaSupport
#if canImport(Glibc)
import Glibc
#endif

/// The adapter behind `private_data`; callbacks reach it through the FUSE context.
private func adapter() -> MediaFS {
    Unmanaged<MediaFS>.fromOpaque(fuse_get_context()!.pointee.private_data).takeUnretainedValue()
}

/// Runs a callback body, turning a thrown error into a negative errno.
func reply(_ what: String, _ body: () throws -> Int32) -> Int32 {
    do {
        return try body()
    } catch let error as MediaError {
        Log.debug("\(what): \(error.message)")
        return -error.errno
    } catch {
        Log.error("\(what): \(error)")
        return -EIO
    }
}

/// The path a callback was given, as a Swift string.
private func pathString(_ path: UnsafePointer<CChar>?) -> String {
    String(cString: path!)
}

/// Administration (the writable xattrs) belongs to the mount's owner and
/// root. The kernel already refuses others through the mode bits
/// (`default_permissions`); this holds even if those change.
private func requireAdministrator(_ fs: MediaFS) throws {
    try requireAdministrator(caller: fuse_get_context()!.pointee.uid, owner: fs.owner.uid)
}

/// EACCES unless `caller` is root or the mount's owner.
func requireAdministrator(caller: uid_t, owner: uid_t) throws {
    if caller != 0 && caller != owner {
        throw MediaError(EACCES, "only the mount's owner (uid \(owner)) and root may administer it")
    }
}

/// What the core's answer to an open (`Catalog.open`) sets in its reply.
func applyOpened(_ served: Opened.Served, to info: inout fuse_file_info) {
    info.keep_cache = served.keepCache ? 1 : 0
    info.direct_io = served.directIO ? 1 : 0
}

/// listxattr's list: each name followed by a NUL.
func attributeList(_ names: [String]) -> [UInt8] {
    names.flatMap { Array($0.utf8) + [0] }
}

/// statfs's answer, in 4 KiB blocks: the cache's capacity and what is
/// free of it, and as many inodes as the mount has files.
func fileSystemStat(capacity: Int64, available: Int64, files: Int) -> statvfs {
    let block: Int64 = 4096
    var stat = statvfs()
    stat.f_bsize = UInt(block)
    stat.f_frsize = UInt(block)
    stat.f_blocks = fsblkcnt_t(capacity / block)
    stat.f_bfree = fsblkcnt_t(available / block)
    stat.f_bavail = fsblkcnt_t(available / block)
    stat.f_files = fsfilcnt_t(files)
    stat.f_namemax = 255
    return stat
}

/// Copies a value out the way getxattr and listxattr must: its size when
/// the caller asks with size 0, ERANGE when the buffer is too small.
func copyOut(_ bytes: [UInt8], to buffer: UnsafeMutablePointer<CChar>?, size: Int) throws -> Int32 {
    if size == 0 { return Int32(bytes.count) }
    guard bytes.count <= size else { throw MediaError(ERANGE, "buffer too small") }
    bytes.withUnsafeBytes { UnsafeMutableRawPointer(buffer!).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
    return Int32(bytes.count)
}

/// A directory's attributes: the owner's, dated at the mount.
private func directoryStat(_ fs: MediaFS) -> stat {
    directoryStat(owner: fs.owner, mountedAt: fs.mountedAt)
}

func directoryStat(owner: (uid: uid_t, gid: gid_t), mountedAt: time_t) -> stat {
    var stat = ownedStat(owner)
    stat.st_mode = S_IFDIR | 0o755
    stat.st_nlink = 2
    stat.st_mtim = timespec(tv_sec: mountedAt, tv_nsec: 0)
    stat.st_ctim = stat.st_mtim
    stat.st_atim = stat.st_mtim
    return stat
}

/// A file's attributes, the same from getattr and from readdirplus.
private func fileStat(_ fs: MediaFS, _ attributes: (size: Int64, mtime: Int)) -> stat {
    fileStat(owner: fs.owner, attributes)
}

func fileStat(owner: (uid: uid_t, gid: gid_t), _ attributes: (size: Int64, mtime: Int)) -> stat {
    var stat = ownedStat(owner)
    stat.st_mode = S_IFREG | 0o644
    stat.st_nlink = 1
    stat.st_size = off_t(attributes.size)
    // Rounded up without `size + 511`, which overflows for a size near Int64.max.
    stat.st_blocks = blkcnt_t(attributes.size / 512 + (attributes.size % 512 == 0 ? 0 : 1))
    stat.st_mtim = timespec(tv_sec: attributes.mtime, tv_nsec: 0)
    stat.st_ctim = stat.st_mtim
    stat.st_atim = stat.st_mtim
    return stat
}

/// The owner's write bit is what lets the kernel pass the owner's user.*
/// xattr writes (administration) to us under `default_permissions`; every
/// write to content still gets EROFS.
private func ownedStat(_ owner: (uid: uid_t, gid: gid_t)) -> stat {
    var stat = Glibc.stat()
    stat.st_uid = owner.uid
    stat.st_gid = owner.gid
    return stat
}

func makeOperations() -> fuse_operations {
    var ops = fuse_operations()

    ops.`init` = { conn, config in
        // Always readdirplus, not only for a directory's first batch: a
        // listing is nearly always followed by a stat of every entry, and
        // with attributes known those stats never reach us.
        conn!.pointee.want &= ~UInt32(FUSE_CAP_READDIRPLUS_AUTO)
        // libfuse derives the congestion threshold (3/4 of it) when left 0.
        conn!.pointee.max_background = adapter().kernelReadsAtOnce
        // Attributes change only when revalidation says so (and then the
        // kernel is told); names come and go at run time (user.mediafs.add,
        // remove, directory listings), so the kernel keeps them only briefly.
        config!.pointee.entry_timeout = 1
        config!.pointee.attr_timeout = 60
        config!.pointee.negative_timeout = 1
        return fuse_get_context()!.pointee.private_data
    }

    ops.destroy = { _ in adapter().stop() }

    ops.getattr = { path, stat, info in
        reply("getattr") {
            let fs = adapter()
            // Off the first open's path: the lookup that precedes it comes here.
            fs.pinKernelReadaheadOnce()
            fs.catalog.statistics.countAttributeRequest()
            // Asked through an open file (the kernel names the handle for a
            // regular file's read or fstat): its file's, whatever its name
            // leads to now. A refresh that removed the name has the kernel
            // drop its attributes (0051), and the handle reads on.
            if let info, info.pointee.fh != 0 {
                stat!.pointee = fileStat(fs, try OpenFile.borrow(info.pointee.fh).loader.attributes())
                return 0
            }
            // Who looks the file up: asked only when a cold file's probe
            // starts, whether it reads the file next (decisions 0061, 0062).
            let pid = fuse_get_context()!.pointee.pid
            guard let attributes = try fs.catalog.attributes(at: pathString(path), lookup: {
                fs.classifier.reader(thread: pid)
            }) else {
                stat!.pointee = directoryStat(fs)
                return 0
            }
            stat!.pointee = fileStat(fs, attributes)
            return 0
        }
    }

    ops.opendir = { _, info in
        info!.pointee.fh = OpenDirectory().handle
        return 0
    }

    ops.releasedir = { _, info in
        OpenDirectory.release(info!.pointee.fh)
        return 0
    }

    // Entries go out with the offset of the next one, so a listing larger
    // than the kernel's buffer resumes where it stopped. Under readdirplus
    // each entry whose attributes are known (a remount, a listing already
    // probed) carries them: `ls -l` then needs no LOOKUP per file. The
    // others go without, and their stat waits on the probe as before.
    ops.readdir = { path, buffer, filler, offset, info, flags in
        reply("readdir") {
            let fs = adapter()
            let directory = OpenDirectory.borrow(info!.pointee.fh)
            if offset == 0 { directory.entries = try fs.catalog.list(pathString(path)) }
            let plus = flags.rawValue & FUSE_READDIR_PLUS.rawValue != 0
            let none = fuse_fill_dir_flags(rawValue: 0)
            var position = Int(offset)
            // Positions 0 and 1 are "." and "..", then the entries.
            while position < directory.entries.count + 2 {
                let next = off_t(position + 1)
                let full: Int32
                switch position {
                case 0: full = filler!(buffer, ".", nil, next, none)
                case 1: full = filler!(buffer, "..", nil, next, none)
                default:
                    let entry = directory.entries[position - 2]
                    var stat = Glibc.stat()
                    var fill = none
                    if entry.isDirectory {
                        stat = directoryStat(fs)
                        fill = plus ? FUSE_FILL_DIR_PLUS : none
                    } else if plus, let attributes = entry.knownAttributes {
                        stat = fileStat(fs, attributes)
                        fill = FUSE_FILL_DIR_PLUS
                    } else {
                        stat.st_mode = S_IFREG
                    }
                    full = filler!(buffer, entry.name, &stat, next, fill)
                }
                if full != 0 { break }
                position += 1
            }
            return 0
        }
    }

    ops.open = { path, info in
        reply("open") {
            let fs = adapter()
            var mode: Passthrough.Mode?
            let reader = fs.classifier.reader(thread: fuse_get_context()!.pointee.pid)
            let opened = try fs.catalog.open(pathString(path), flags: info!.pointee.flags, reader: reader,
                                             classifier: fs.classifier) { loader in
                mode = fs.passthrough?.open(loader)
                if case .passthrough? = mode { return true }
                return false
            }
            if opened.served.kernelReadsAhead { fs.pinKernelReadaheadOnce() }
            applyOpened(opened.served, to: &info!.pointee)
            info!.pointee.fh = OpenFile(opened, mode: mode).handle
            // Last: the reply libfuse sends next from this thread is this open's.
            if case .passthrough(let grant)? = mode { Passthrough.amendNextOpenReply(grant) }
            return 0
        }
    }

    ops.read = { _, buffer, size, offset, info in
        reply("read") {
            let file = OpenFile.borrow(info!.pointee.fh)
            let target = UnsafeMutableRawBufferPointer(start: buffer, count: size)
            let timings = adapter().catalog.statistics.timings
            let started = timings.clock.monotonic()
            defer { timings.readWait.observe(since: started, on: timings.clock) }
            do {
                let account = file.shared?.account(thread: fuse_get_context()!.pointee.pid)
                return Int32(try file.loader.read(into: target, at: Int64(offset), pattern: file.pattern,
                                                  account: account))
            } catch let error as MediaError {
                // A failing server is logged once per file (its first
                // failure), not once per read the kernel retries.
                let line = "read of \(file.loader.source.displayURL) at \(offset): \(error.message)"
                if !error.logged && file.loader.claimFailureLog() { Log.error(line) } else { Log.debug(line) }
                throw error
            }
        }
    }

    ops.release = { path, info in
        let file = OpenFile.borrow(info!.pointee.fh)
        if let mode = file.mode, adapter().passthrough?.close(mode, of: file.loader) == true, let path {
            adapter().invalidate([pathString(path)])
        }
        adapter().catalog.release(file.pattern, of: file.loader, shared: file.shared)
        OpenFile.release(info!.pointee.fh)
        return 0
    }

    ops.getxattr = { path, name, value, size in
        reply("getxattr") {
            let catalog = adapter().catalog
            let attribute = String(cString: name!)
            let text: String
            switch try catalog.node(at: pathString(path)) {
            case .file(let loader):
                text = try AdminAttributes.read(attribute, of: loader)
            case .directory where pathString(path) == "/":
                text = try AdminAttributes.readRoot(attribute, of: catalog)
            case .directory:
                text = try AdminAttributes.readDirectory(attribute)
            }
            return try copyOut(Array(text.utf8), to: value, size: size)
        }
    }

    ops.listxattr = { path, list, size in
        reply("listxattr") {
            let names: [String]
            switch try adapter().catalog.node(at: pathString(path)) {
            case .file: names = AdminAttributes.list(root: false)
            case .directory where pathString(path) == "/": names = AdminAttributes.listRoot(of: adapter().catalog)
            case .directory: names = AdminAttributes.listDirectory()
            }
            return try copyOut(attributeList(names), to: list, size: size)
        }
    }

    ops.setxattr = { path, name, value, size, _ in
        reply("setxattr") {
            let fs = adapter()
            try requireAdministrator(fs)
            let attribute = String(cString: name!)
            let text = String(decoding: UnsafeRawBufferPointer(start: value, count: size), as: UTF8.self)
            let where_ = pathString(path)
            let effect: AdminAttributes.Effect
            switch try fs.catalog.node(at: where_) {
            case .file(let loader):
                effect = try AdminAttributes.write(attribute, value: text, to: loader, at: where_)
            case .directory where where_ == "/":
                effect = try AdminAttributes.writeRoot(attribute, value: text, to: fs.catalog)
            case .directory:
                effect = try AdminAttributes.writeDirectory(attribute, value: text, to: fs.catalog, at: where_)
            }
            if case .invalidate(let urls) = effect { fs.invalidate(urls: urls, wait: true) }
            return 0
        }
    }

    ops.removexattr = { _, _ in
        reply("removexattr") {
            try requireAdministrator(adapter())
            throw MediaError(ENOTSUP, "attributes cannot be removed")
        }
    }

    // The mount is read-only; without these the kernel would report ENOSYS.
    // The owner's write bits let every one of them reach us: each must refuse.
    ops.mknod = { _, _, _ in -EROFS }
    ops.mkdir = { _, _ in -EROFS }
    ops.unlink = { _ in -EROFS }
    ops.rmdir = { _ in -EROFS }
    ops.symlink = { _, _ in -EROFS }
    ops.rename = { _, _, _ in -EROFS }
    ops.link = { _, _ in -EROFS }
    ops.chmod = { _, _, _ in -EROFS }
    ops.chown = { _, _, _, _ in -EROFS }
    ops.truncate = { _, _, _ in -EROFS }
    ops.write = { _, _, _, _, _ in -EROFS }
    ops.create = { _, _, _ in -EROFS }
    ops.utimens = { _, _, _ in -EROFS }

    ops.statfs = { _, stat in
        reply("statfs") {
            let usage = adapter().catalog.usage()
            stat!.pointee = fileSystemStat(capacity: usage.capacity, available: usage.available,
                                           files: adapter().catalog.cacheUsage().entries)
            return 0
        }
    }

    return ops
}
