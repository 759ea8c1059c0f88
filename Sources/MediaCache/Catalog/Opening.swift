// How an open is served, decided here so that the FUSE layer only converts
// (Operations.swift): the file's loader, revalidated, with the kernel's
// attributes of a changed file dropped first; the handle's access pattern,
// of the class of the process that opened it; and whether the kernel reads
// the file itself (passthrough), around its page cache (direct I/O) or
// through it, keeping or dropping its pages.
import Foundation
import MediaSupport

/// An open's answer: what the handle carries, and how the kernel reads it.
public struct Opened: Sendable {
    public enum Served: Equatable, Sendable {
        /// The kernel reads the backing data file itself (FUSE passthrough).
        case kernelReads
        /// A scanner's reads (one known by name: a thumbnail's ffmpeg reads
        /// ahead) reach the daemon at their own sizes, with no kernel
        /// readahead around them: a library scan fetches what its probes
        /// read, not 128 KiB around each. Around the page cache, it can meet
        /// no page of another version.
        case scannerDirect
        /// Through the page cache: its pages kept from open to open while
        /// the kernel is known to hold none of another version (every name
        /// of the file invalidated after the last change), else dropped.
        case pageCache(keep: Bool)
        /// A handle of the version before still reads through the page
        /// cache: this one goes around it (direct I/O), so neither sees the
        /// other's pages.
        case aroundPageCache
    }

    public let loader: FileLoader
    public let pattern: ReadPattern
    public let served: Served
    /// Who else reads through this handle (a descriptor shared with a
    /// child), each counted apart; nil when the kernel reads it itself or
    /// its opener is not known.
    public let shared: SharedReaders?
}

extension Opened.Served {
    /// fuse_file_info's keep_cache.
    public var keepCache: Bool { self == .pageCache(keep: true) }
    /// fuse_file_info's direct_io.
    public var directIO: Bool { self == .scannerDirect || self == .aroundPageCache }
    /// The kernel reads ahead of this handle's reads (its readahead size is
    /// pinned at the first such open, MediaFS).
    public var kernelReadsAhead: Bool { self != .kernelReads && self != .scannerDirect }
}

extension Catalog {
    /// How long an open of a changed file waits for the kernel to drop its
    /// attributes, so the handle's fstat shows the new size.
    public static let invalidationWait = 2.0

    /// EROFS for an open that would write: any access mode but O_RDONLY, or
    /// O_TRUNC (which arrives as an open's flag, not as a truncate, under
    /// atomic_o_trunc, libfuse's default).
    public static func refuseWriting(flags: Int32) throws {
        if flags & O_ACCMODE != O_RDONLY || flags & O_TRUNC != 0 {
            throw MediaError(EROFS, "read-only")
        }
    }

    /// Opens the file at `path` for `reader` (the class of the caller's
    /// process, or of one of its nearest ancestors). `kernelReads` offers
    /// the loader to the mount's passthrough, after revalidation and before
    /// the handle is attached; it returns whether the kernel took it.
    /// `classifier` names the process of a thread that reads the handle
    /// later (SharedReaders); nil: every read counts as the opener's.
    public func open(_ path: String, flags: Int32, reader: Reader, classifier: ProcessClassifier? = nil,
                     kernelReads: (FileLoader) -> Bool = { _ in false }) throws -> Opened {
        try Self.refuseWriting(flags: flags)
        let loader = try file(at: path)
        if try willOpen(loader) {
            // The file changed: this handle's fstat must show the new size,
            // so the kernel drops the old attributes first. Its pages are
            // the page-cache decision's below, whatever this wait.
            loader.awaitKernelForgot(timeout: Self.invalidationWait)
        }
        let pattern = ReadPattern(reader, account: reader.process.map {
            readers.opened(by: $0, as: reader.readClass, file: path, rule: reader.rule)
        })
        let served: Opened.Served
        if kernelReads(loader) {
            loader.attach(pattern, throughPageCache: false)
            statistics.countKernelReadOpen()
            pattern.account?.readByKernel()
            served = .kernelReads
        } else if !pattern.readsAhead {
            loader.attach(pattern, throughPageCache: false)
            served = .scannerDirect
        } else {
            switch loader.attach(pattern) {
            case .keep: served = .pageCache(keep: true)
            case .drop: served = .pageCache(keep: false)
            case .bypass: served = .aroundPageCache
            }
        }
        opened(path)
        var shared: SharedReaders?
        if served != .kernelReads, let classifier, let opener = reader.process {
            shared = SharedReaders(opener: opener, readClass: reader.readClass, file: path, book: readers,
                                   lookUp: { classifier.reader(thread: $0).process })
        }
        return Opened(loader: loader, pattern: pattern, served: served, shared: shared)
    }

    /// A handle closed: its loader lets go of what it alone asked for, and
    /// its reader's account counts one handle fewer, as do those of the
    /// processes that read through it (`shared`).
    public func release(_ pattern: ReadPattern, of loader: FileLoader, shared: SharedReaders? = nil) {
        loader.release(pattern)
        if let account = pattern.account { readers.closed(account) }
        shared?.close()
    }
}
