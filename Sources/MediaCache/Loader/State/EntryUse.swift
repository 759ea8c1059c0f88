// What an entry's metadata keeps of its use, beside its bytes and its
// version: when it was last read (the evictor's order), whether it is
// pinned (never evicted or trimmed, FileLoader+Pinning.swift) and whether
// only a library scan read it (ReadClass: its bytes go first). A part of
// LoaderState, which alone changes it, so every change that the metadata
// must keep marks the entry unsaved.

struct EntryUse {
    /// Seconds since the epoch, with their fraction: two files read in
    /// the same second must still be evicted oldest first. The metadata
    /// keeps whole seconds.
    private(set) var lastAccess = 0.0
    private(set) var pinned = false
    /// No player has read it: with read classes on, a new entry is, until
    /// a player reads it; one read back from disk with bytes is not, unless
    /// its metadata says so.
    private(set) var scanOnly = false

    /// As the metadata on disk says.
    init(lastAccess: Double = 0, pinned: Bool = false, scanOnly: Bool = false) {
        self.lastAccess = lastAccess
        self.pinned = pinned
        self.scanOnly = scanOnly
    }

    mutating func accessed(at wall: Double) { lastAccess = wall }

    /// Returns whether the pin changed.
    mutating func pin(_ on: Bool) -> Bool {
        defer { pinned = on }
        return pinned != on
    }

    /// A player read it, or a user asked for it: it is a player's now.
    /// Returns whether it was a scan's.
    mutating func played() -> Bool {
        defer { scanOnly = false }
        return scanOnly
    }

    /// Its record said only scans read it, or it is new with read classes on.
    mutating func scanned(_ only: Bool) { scanOnly = only }
}
