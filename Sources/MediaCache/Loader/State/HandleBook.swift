// The file's open handles and what the kernel holds of it: closed players'
// handles within their grace, fresh ones that may be handed a streak, the
// handles reading through the page cache by the version they opened, the
// version whose pages alone the kernel may hold, and the backing files it
// reads in place (passthrough). Part of LoaderState: touched only under
// the loader's lock.

struct HandleBook {
    /// Closed players' handles within `--handle-grace`, with when it ends:
    /// their transfers run on for a handle that reads on where one stopped.
    private(set) var lingering: [ObjectIdentifier: (pattern: ReadPattern, until: Double)] = [:]
    /// Players' handles whose first read found no closed handle to go on
    /// from: one still open may close after them (releases come late), and
    /// then hands them its streak and transfers. Removed at their release.
    private(set) var fresh: [ObjectIdentifier: ReadPattern] = [:]
    /// Handles open on the file (FUSE opens, until their release): the
    /// lookahead fetches only for a file that is being read.
    private(set) var openHandles = 0
    /// The reader accounts of open handles, by handle: a transfer a
    /// handle's read starts counts its bytes in the handle's account.
    private(set) var accounts: [ObjectIdentifier: ReaderAccount] = [:]
    /// Open handles that read through the kernel's page cache, by the
    /// generation they opened: while one of an older generation is open, a
    /// new handle bypasses the page cache (direct I/O), so the old handle
    /// never finds pages of the new version there, nor the new one old pages.
    private(set) var pageCacheHandles: [Int: Int] = [:]
    /// The generation whose pages alone the kernel may hold: every name of
    /// the file was invalidated after the change to it. Until it catches up
    /// with the version's generation, opens go without keep_cache.
    private(set) var kernelClean = 0
    /// Backing files registered on the data file for the kernel to read
    /// itself (FUSE passthrough): while any, its bytes never change in place.
    private(set) var kernelReaders = 0
    /// Bumped when a new data file replaces one the kernel still reads.
    private(set) var dataVersion = 0

    var kernelReading: Bool { kernelReaders > 0 }

    /// A handle opened; returns how many are open now.
    mutating func opened() -> Int {
        openHandles += 1
        return openHandles
    }

    /// A handle's account, counted in from its attach to its release.
    mutating func account(_ pattern: ReadPattern, open: Bool) {
        guard let account = pattern.account else { return }
        accounts[ObjectIdentifier(pattern)] = open ? account : nil
    }

    /// A handle released; returns how many are open now.
    mutating func closed() -> Int {
        openHandles = max(0, openHandles - 1)
        return openHandles
    }

    /// Whether a handle of a generation other than `generation` reads
    /// through the page cache now.
    func pageCacheHeld(byOtherThan generation: Int) -> Bool {
        pageCacheHandles.keys.contains(where: { $0 != generation })
    }

    mutating func pageCacheOpened(generation: Int) { pageCacheHandles[generation, default: 0] += 1 }

    mutating func pageCacheClosed(generation: Int) {
        guard let count = pageCacheHandles[generation] else { return }
        pageCacheHandles[generation] = count > 1 ? count - 1 : nil
    }

    /// The kernel dropped every page of versions before `generation`.
    mutating func kernelForgot(upTo generation: Int) { kernelClean = max(kernelClean, generation) }

    /// No kernel holds pages of the file (no mount told of the change):
    /// it is clean at `generation` at once.
    mutating func kernelIsClean(at generation: Int) { kernelClean = generation }

    /// The kernel reads the data file of now in place; returns its version.
    mutating func kernelReaderAdded() -> Int {
        kernelReaders += 1
        return dataVersion
    }

    /// A backing file of data file `version` is gone.
    mutating func kernelReaderRemoved(version: Int) {
        if version == dataVersion { kernelReaders = max(kernelReaders - 1, 0) }
    }

    /// A new data file replaces the one the kernel reads: its backing
    /// files read the old one, which no write reaches any more.
    mutating func dataFileReplaced() {
        dataVersion += 1
        kernelReaders = 0
    }

    /// A closed player's handle runs on until `until`.
    mutating func linger(_ pattern: ReadPattern, until: Double) { lingering[ObjectIdentifier(pattern)] = (pattern, until) }

    mutating func endLingering(_ owner: ObjectIdentifier) { lingering[owner] = nil }

    /// A player's handle that found no closed handle to go on from, kept
    /// while fewer than `most` are.
    mutating func addFresh(_ pattern: ReadPattern, most: Int) {
        if fresh.count < most { fresh[ObjectIdentifier(pattern)] = pattern }
    }

    mutating func removeFresh(_ id: ObjectIdentifier) { fresh[id] = nil }
}
