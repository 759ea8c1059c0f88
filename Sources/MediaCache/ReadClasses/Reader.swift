// What an open learns of the process behind it: the class its bytes and
// its network place are (`readClass`), and whether it reads on like a
// player (`readsAhead`). A scanner known by name (ffprobe, mediainfo) hops
// through headers and indexes: it gets exactly what it reads. A one-frame
// extraction (a thumbnail's ffmpeg) decodes a run of frames from one place:
// it reads a few megabytes in a row, which at one round trip per 32 KiB
// read would take it ten seconds a file on a far link; so it keeps the
// kernel's readahead and a link-sized first fetch, while its bytes live in
// the scan budget and wait behind players'. Whether its command line asks
// to start past the file's start (`ffmpeg -ss 40 -i`): its first read of
// the head is no sign it reads on from there. And the process itself, so
// its reads are counted as its own.
public struct Reader: Sendable, Equatable {
    public var readClass: ReadClass
    public var readsAhead: Bool
    /// Its arguments ask to start playing past the file's start
    /// (`ProcessClassifier.startsElsewhere`): no stream from its first read
    /// at the file's first byte (decision 0059).
    public var startsElsewhere = false
    /// A known player (`ProcessClassifier.players`) playing from the
    /// start: its lookup of a cold file asks for the whole file, held
    /// after the head, since its open and its reads from byte 0 follow
    /// within milliseconds (decision 0061). Not a program read classes
    /// only take for a player by default (`cat`, `ls`): `ls -l`'s lookups
    /// open nothing.
    public var streamsFromLookup = false
    /// A known player or scanner by its own name (ffprobe, mediainfo):
    /// its lookup of a file is followed by its reads of it, so a cold
    /// VOD's lookup brings the file's first bytes and its segments' heads
    /// with the lengths (decision 0062). `stat`, `ls` and `find` are not.
    public var readsAfterLookup = false
    /// The process, when /proc told it: whose account the open's reads and
    /// fetches count in (ReaderBook).
    public var process: ReaderProcess?
    /// The rule that named its class, when one did (the log says it).
    public var rule: String?

    public init(readClass: ReadClass, readsAhead: Bool, process: ReaderProcess? = nil) {
        self.readClass = readClass
        self.readsAhead = readsAhead
        self.process = process
    }

    /// The same class, of `process`.
    func of(_ process: ReaderProcess?) -> Reader {
        var reader = self
        reader.process = process
        return reader
    }

    /// What a rule's class makes of a reader: a player reads ahead; a scan
    /// or a background job gets what it asks for, and the runs it reads on.
    init(ruled rule: ReaderRule) {
        self.init(readClass: rule.readClass, readsAhead: rule.readClass.plays)
        self.rule = rule.reason
    }

    public static let player = Reader(readClass: .play, readsAhead: true)
    public static let scanner = Reader(readClass: .scan, readsAhead: false)
    public static let frameExtraction = Reader(readClass: .scan, readsAhead: true)
}
