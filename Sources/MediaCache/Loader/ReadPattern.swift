// The access pattern of one open handle, which decides how far ahead of a
// reader transfers reach. The kernel already reads ahead of a sequential
// reader; mediafs adds its own window only once a handle has read 4 MiB in
// a row, and keeps it at half of what the streak has read, so a player that
// probes a file or decodes a second after a seek leaves little fetched for
// nothing, while a long stream earns 64 MiB. A far link's round trip of bytes
// is earned the same way, from 1 MiB.
//
// Its state is behind a lock of its own, a leaf taken under the loader's:
// uncontended (the loader's lock already orders the handle's reads), and
// the compiler checks what crosses threads.
import MediaSupport

public final class ReadPattern: Sendable {
    /// Bytes read in a row before mediafs reads ahead at all.
    public static let streakBeforeReadahead: Int64 = 4 << 20
    public static let maxWindow: Int64 = 64 << 20
    /// The kernel sends a stream's reads from several threads, slightly out
    /// of order: a read this close to the last one still counts as following it.
    public static let sequentialSlack: Int64 = 4 << 20

    /// A read this big is the kernel reading ahead of a reader it thinks
    /// streams (or one reading big pieces): the first read after a seek.
    public static let largeRead: Int64 = 32 << 10

    /// A link-sized fetch of a fresh streak (after a seek, at the start)
    /// reaches this far at most, and more only as the streak grows: a fast
    /// link's round trip, or a slow local server's, is megabytes fetched for
    /// one small read (decision 0016).
    public static let linkStart: Int64 = 1 << 20

    /// A scan's handle has no readahead, so a demuxer reading on would pay a
    /// round trip a read. A scan that reads on fetches, with a read that
    /// misses, that read and half of what its run has read past it, up to
    /// `scanWindowMax`: log1.5 round trips, and at most a third of what it
    /// fetched is not read (decision 0014).
    public static let scanWindowMax: Int64 = 8 << 20
    /// The least a scan's long transfer asks for: ffprobe reads a few
    /// hundred KiB past a file's head (decision 0014).
    public static let scanPieceMin: Int64 = 512 << 10
    /// Where a long transfer from `start` ends: a player's at the end of the
    /// file; a scan's of an MPEG-TS `scanWindowMax` on (a TS has no index:
    /// the demuxer reads on for its whole probe size, 5 MB by default); any
    /// other scan's `scanPiece` on (its run so far and its read again),
    /// between `scanPieceMin` and `scanWindowMax`; then a new one at its
    /// next miss. A held transfer's server fills the sockets' buffers past
    /// the hold whatever is read, and a scan stops reading soon: in pieces
    /// of its run and its read a stop leaves sent for nothing at most what
    /// it read, or the least piece (decision 0014).
    static func longTransferEnd(from start: Int64, piece: Int64, readClass: ReadClass,
                                container: ContainerSniffer.Container?, length: Int64) -> Int64 {
        guard !readClass.plays else { return length }
        let piece = container == .mpegTS ? scanWindowMax : max(min(piece, scanWindowMax), scanPieceMin)
        return start > length - piece ? length : start + piece
    }

    /// Who the handle reads for, decided at its open: a scan's reads
    /// fetch only what they ask for (no window, no link-sized fetch) but
    /// for half a run they read on (`scanWindow`), unless it `readsAhead` (a one-frame extraction: a link-sized fetch
    /// as a player gets, never a window or a long transfer).
    public let readClass: ReadClass
    public let readsAhead: Bool
    private let core: Locked<Core>

    /// Where its reads, and the transfers they start, are counted: its
    /// process's account of the file (nil: a handle of no known process).
    public let account: ReaderAccount?

    /// Its process asked to start past the file's start (`Reader.startsElsewhere`).
    public let startsElsewhere: Bool

    public init(readClass: ReadClass = .play, readsAhead: Bool? = nil, startsElsewhere: Bool = false,
                account: ReaderAccount? = nil) {
        self.readClass = readClass
        self.readsAhead = readsAhead ?? (readClass == .play)
        self.startsElsewhere = startsElsewhere
        self.account = account
        core = Locked(Core(readClass: readClass, readsAhead: self.readsAhead), rank: .readPattern)
    }

    public convenience init(_ reader: Reader, account: ReaderAccount? = nil) {
        self.init(readClass: reader.readClass, readsAhead: reader.readsAhead, startsElsewhere: reader.startsElsewhere,
                  account: account)
    }

    /// The content version the handle was opened on; its reads fail once
    /// the remote file changed, so no read mixes two versions.
    var generation: Int? {
        get { core.withLock { $0.generation } }
        set { core.withLock { $0.generation = newValue } }
    }
    /// Counted among the loader's page-cache handles of `generation`.
    var inPageCache: Bool {
        get { core.withLock { $0.inPageCache } }
        set { core.withLock { $0.inPageCache = newValue } }
    }
    /// How the last read stepped from the one before it through a file of
    /// parts (FileLoader+Parts.swift).
    var partStep: PartStep {
        get { core.withLock { $0.partStep } }
        set { core.withLock { $0.partStep = newValue } }
    }
    enum PartStep { case other, contiguous, walk }

    var looksSequential: Bool { core.withLock { $0.looksSequential } }
    var streams: Bool { core.withLock { $0.streams } }
    var cachedReadWindow: Int64 { core.withLock { $0.cachedReadWindow } }
    var lastReadEnd: Int64 { core.withLock { $0.lastReadEnd } }
    var window: Int64 { core.withLock { $0.window } }
    var hasRead: Bool { core.withLock { $0.hasRead } }
    var firstStreakStart: Int64 { core.withLock { $0.firstStreakStart } }
    /// What a scan's long transfer asks for (`longTransferEnd`).
    var scanPiece: Int64 { core.withLock { $0.scanPiece } }
    public func fetchWindow(bytesPerRoundTrip: Int64) -> Int64 { core.withLock { $0.fetchWindow(bytesPerRoundTrip: bytesPerRoundTrip) } }
    func follows(_ offset: Int64) -> Bool { core.withLock { $0.follows(offset) } }

    /// A new handle of the same reader (it closed and opened the file
    /// again, as Plex and ffmpeg do) goes on with the closed one's streams
    /// and window, not from cold.
    func resume(from closed: ReadPattern) {
        let closed = closed.core.withLock { $0 }
        core.withLock { $0.resume(from: closed) }
    }

    /// The handle was opened before the one it goes on from was released
    /// (FUSE sends a release after the close, and the reopen may overtake
    /// it): it adds the closed handle's streak to its own.
    func inherit(_ closed: ReadPattern) {
        let closed = closed.core.withLock { $0 }
        core.withLock { $0.inherit(closed) }
    }

    /// Records a read; returns whether it jumped away from both streams
    /// (a read that follows the other stream switches to it: no jump).
    func record(offset: Int64, end: Int64) -> Bool {
        core.withLock { $0.record(offset: offset, end: end) }
    }

    /// What the handle has read and what follows from it.
    private struct Core: Sendable {
        let readClass: ReadClass
        let readsAhead: Bool

        init(readClass: ReadClass, readsAhead: Bool) {
            self.readClass = readClass
            self.readsAhead = readsAhead
        }

        var generation: Int?
        var inPageCache = false
        /// Where a run of reads goes on, and how long it has run.
        struct Stream {
            var nextOffset: Int64 = -1
            var streakBytes: Int64 = 0
            /// Reads in the streak: from the second on, a reader looks
            /// sequential (a random reader's every read starts a streak).
            var streakReads = 0

            func follows(_ offset: Int64) -> Bool {
                nextOffset >= 0 && abs(offset - nextOffset) <= ReadPattern.sequentialSlack
            }
        }

        /// The stream the last read was part of, and the one before it: a
        /// player that reads two places of a file in turn (the audio and the
        /// video of a file not interleaved) is two streams, each with its own
        /// window and its transfers, not one stream that keeps seeking.
        private var current = Stream()
        private var other = Stream()
        private var nextOffset: Int64 { current.nextOffset }
        private var streakBytes: Int64 { current.streakBytes }
        private var streakReads: Int { current.streakReads }
        /// Whether the reader streams, or starts to: its fetches may be sized
        /// to the link rather than to the read.
        var looksSequential: Bool { streakReads > 1 || streakBytes >= ReadPattern.largeRead }
        /// Whether the reader has read on from where it was twice or more: a
        /// stream, whose fetches may be long ones (not a single large read,
        /// which a random reader's reads can each be). A scan that reads on,
        /// exactly, streams too: its fetch is one long transfer held half its
        /// run ahead (`scanWindow`), not a request a window (decision 0014).
        var streams: Bool {
            readClass == .play ? streakReads > 1 : !readsAhead && contiguousReads > 1
        }
        /// How far ahead of a read served from the cache the handle's long
        /// transfer is let go on.
        var cachedReadWindow: Int64 { readsAhead ? window : scanWindow }
        /// Where the last read recorded ended (-1: none yet).
        private(set) var lastReadEnd: Int64 = -1
        var partStep = PartStep.other
        private(set) var window: Int64 = 0
        /// How far a fetch for this handle reaches ahead of its read, given a
        /// link that holds `bytesPerRoundTrip` in flight: a reader that looks
        /// sequential gets that round trip (less leaves the link idle while it
        /// comes back for more), up to half its streak or `linkStart`.
        func fetchWindow(bytesPerRoundTrip: Int64) -> Int64 {
            guard readsAhead else { return scanWindow }
            guard looksSequential, bytesPerRoundTrip > window else { return window }
            return min(bytesPerRoundTrip, max(streakBytes / 2, ReadPattern.linkStart))
        }

        private var scanWindow: Int64 {
            guard !readClass.plays, contiguousReads > 1 else { return 0 }
            // Measured from the read's start: the read, and half the run past it.
            return min(lastReadSize + contiguousBytes / 2, ReadPattern.scanWindowMax)
        }
        private var lastReadSize: Int64 = 0
        /// Its run so far and its read once more: a piece whose end is
        /// about twice as far from the run's start as the read's.
        var scanPiece: Int64 { contiguousBytes + lastReadSize }
        /// The run of reads each starting where the last ended, exactly (a
        /// scan's handle is direct I/O: its reads come as the program made
        /// them). A scanner's reads at places a few MiB apart are no run.
        private var contiguousBytes: Int64 = 0
        private var contiguousReads = 0

        /// Whether the handle has read anything yet.
        var hasRead: Bool { nextOffset >= 0 }

        /// Whether a read at `offset` would follow one of this handle's streams.
        func follows(_ offset: Int64) -> Bool {
            current.follows(offset) || other.follows(offset)
        }

        mutating func resume(from closed: Core) {
            firstStreakStart = -1
            current = closed.current
            other = closed.other
            window = closed.window
        }

        /// Where its first read began (-1: none yet), while it has not
        /// jumped since: a handle that may be a closed one's sequel.
        private(set) var firstStreakStart: Int64 = -1

        mutating func inherit(_ closed: Core) {
            current.streakBytes += closed.streakBytes
            current.streakReads += closed.streakReads
            updateWindow()
        }

        mutating func record(offset: Int64, end: Int64) -> Bool {
            let follows = current.follows(offset)
            let switches = !follows && other.follows(offset)
            if nextOffset < 0 { firstStreakStart = offset } else if !follows { firstStreakStart = -1 }
            if switches { swap(&current, &other) }
            if follows || switches {
                current.streakBytes += end - offset
                current.streakReads += 1
                current.nextOffset = max(current.nextOffset, end)
            } else {
                // A third place: the stream before the last is forgotten.
                if current.nextOffset >= 0 { other = current }
                current = Stream(nextOffset: end, streakBytes: end - offset, streakReads: 1)
            }
            updateWindow()
            if offset == lastReadEnd {
                contiguousBytes += end - offset
                contiguousReads += 1
            } else {
                (contiguousBytes, contiguousReads) = (end - offset, 1)
            }
            lastReadEnd = end
            lastReadSize = end - offset
            return !follows && !switches && offset != 0
        }

        private mutating func updateWindow() {
            window = streakBytes < ReadPattern.streakBeforeReadahead || !readClass.plays
                ? 0 : min(streakBytes / 2, ReadPattern.maxWindow)
        }
    }
}
