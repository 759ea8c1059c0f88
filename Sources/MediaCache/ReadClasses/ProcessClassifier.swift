// Classifies the process behind an open: `scan` when it, or one of its
// few nearest ancestors (a media server's scanner spawns ffmpeg and
// ffprobe), is named like a known scanner, or when its own arguments ask
// for a single video frame (`-vframes 1`, `-frames:v 1`: the thumbnail and
// chapter-image extractions Jellyfin and Emby run as plain ffmpeg, beside
// the ffmpeg that streams to a viewer); else `play`. Once per open;
// the answer is kept per process with its start time, so a pid the kernel
// hands to a new process is classified again, never inherited. The answer
// names the process too (ReaderProcess), and tells whether its arguments
// ask to start past the file's start (`-ss 40` before `-i`), read classes
// on or off.
import MediaSupport

public final class ProcessClassifier: Sendable {
    /// What media servers and tools that read a library to learn about
    /// it are called. The kernel keeps 15 bytes of a name, so
    /// "Plex Media Scanner" is seen as "Plex Media Scan".
    public static let defaultScanners = ["ffprobe", "mediainfo", "exiftool", "Plex Media Scanner",
                                         "Plex Media Fingerprinter", "mediascanner"]
    /// `comm` is the executable's name cut to this many bytes.
    static let commLength = 15
    /// Programs that play what they open from its start (as the kernel
    /// cuts their names): a media server's transcoder and remuxer included
    /// (Jellyfin's and Emby's ffmpeg, "Plex Transcoder"). Their lookup of a
    /// file is followed by its open and reads (`Reader.streamsFromLookup`).
    static let players: Set<String> = Set(["ffmpeg", "ffplay", "mpv", "vlc", "mplayer", "Plex Transcoder",
                                           "kodi.bin"].map(ProcessClassifier.comm))
    /// Ancestors looked at: a scanner's helper's helper, not the whole tree.
    public static let maxAncestors = 4
    /// Processes remembered; past it the table starts over.
    static let capacity = 4096

    private struct Known {
        var startTime: UInt64
        var reader: Reader
    }

    /// Names cut as the kernel cuts them.
    private let scanners: Set<String>
    /// The user's rules, then the defaults: the first that matches names the class.
    private let rules: [ReaderRule]
    private let table: ProcessTable
    private let known = Locked<[Int32: Known]>([:])

    public init(scanners: [String] = ProcessClassifier.defaultScanners, rules: [ReaderRule] = [],
                table: ProcessTable = ProcFileSystem()) {
        self.scanners = Set(scanners.map { Self.comm($0) })
        self.rules = rules + (scanners.isEmpty && rules.isEmpty ? [] : ReaderRule.defaults)
        self.table = table
    }

    /// Whether any name or rule makes a class other than play: none turns
    /// read classes off.
    public var classifies: Bool { !scanners.isEmpty || !rules.isEmpty }

    static func comm(_ name: String) -> String {
        var cut = ""
        for character in name {
            if cut.utf8.count + String(character).utf8.count > commLength { break }
            cut.append(character)
        }
        return cut
    }

    /// The class of the process whose thread `thread` made a request;
    /// `play` when it cannot be told (it exited, /proc is not readable).
    public func classify(thread: Int32) -> ReadClass {
        reader(thread: thread).readClass
    }

    /// The class of that process, whether it reads on like a player, and
    /// who it is (with read classes off too: every reader is attributed).
    public func reader(thread: Int32) -> Reader {
        guard thread > 0 else { return .player }
        let pid = table.process(ofThread: thread) ?? thread
        guard let stat = table.stat(of: pid) else { return .player }
        if let hit = known.withLock({ $0[pid] }), hit.startTime == stat.startTime { return hit.reader }
        let arguments = table.arguments(of: pid)
        let process = ReaderProcess(pid: pid, startTime: stat.startTime, name: table.name(of: pid) ?? "",
                                    arguments: ReaderProcess.shortForm(arguments ?? []),
                                    parentName: stat.parent > 0 ? table.name(of: stat.parent) ?? "" : "")
        var found = (classifies ? classify(process, stat: stat, arguments: arguments ?? []) : .player).of(process)
        found.startsElsewhere = Self.startsElsewhere(arguments ?? [])
        let knownPlayer = Self.players.contains(process.name)
        found.streamsFromLookup = found.readClass == .play && !found.startsElsewhere && knownPlayer
        found.readsAfterLookup = knownPlayer || scanners.contains(process.name)
        known.withLock { table in
            if table.count >= Self.capacity { table.removeAll(keepingCapacity: true) }
            table[pid] = Known(startTime: stat.startTime, reader: found)
        }
        return found
    }

    /// The first rule that names the process, else its name's or its
    /// ancestors' (a scan), else its arguments' (one frame: a scan).
    private func classify(_ process: ReaderProcess, stat: ProcessStat, arguments: [String]) -> Reader {
        if let rule = rules.first(where: { $0.matches(name: process.name, parent: process.parentName,
                                                      arguments: arguments) }) {
            return Reader(ruled: rule)
        }
        return walk(from: process.pid, stat: stat, arguments: arguments)
    }

    /// The process and up to `maxAncestors` of its ancestors, nearest first.
    private func walk(from pid: Int32, stat: ProcessStat, arguments: [String]) -> Reader {
        var current = pid
        var parent = stat.parent
        for step in 0...Self.maxAncestors {
            if let name = table.name(of: current), scanners.contains(name) { return .scanner }
            guard step < Self.maxAncestors, parent > 1, parent != current else { break }
            current = parent
            guard let next = table.stat(of: current) else { break }
            parent = next.parent
        }
        if Self.extractsOneFrame(arguments) { return .frameExtraction }
        return .player
    }

    /// ffmpeg's options that set how many video frames an output gets.
    static let frameCountOptions: Set<String> = ["-vframes", "-frames:v", "-frames:v:0", "-vframes:v", "-frames"]

    /// Whether a command line asks for one frame: an image made from the
    /// file, not a stream of it. Only read when read classes are on.
    static func extractsOneFrame(_ arguments: [String]) -> Bool {
        guard arguments.count > 1 else { return false }
        for index in 1..<arguments.count - 1 where frameCountOptions.contains(arguments[index]) {
            if arguments[index + 1] == "1" { return true }
        }
        return false
    }

    /// Options that start a player past a file's start: ffmpeg's and
    /// ffplay's input seeks, from the start or from the end, which apply
    /// to an `-i` after them (after the last `-i`, `-ss` is an output's:
    /// the input is read from its start and decoded up to it; ffplay
    /// names its input without `-i`); mpv's `--start`; VLC's
    /// `--start-time`. Each with its value after `=` or as the next
    /// argument.
    static let inputSeekOptions: Set<String> = ["-ss", "-sseof"]
    static let startOptions: Set<String> = ["--start", "--start-time"]

    /// Whether a command line asks to start past the file's start: a seek
    /// option whose value is not zero (`-ss 0`, `00:00:00.000`), or any
    /// seek from the end. Any digit but 0 counts, in any of the programs'
    /// forms (`40`, `00:00:40.000`, `1:30`, `50%`); nothing is converted
    /// to a number.
    static func startsElsewhere(_ arguments: [String]) -> Bool {
        let lastInput = arguments.lastIndex(of: "-i") ?? arguments.count
        for (index, argument) in arguments.enumerated() where index > 0 {
            var option = argument
            var value: Substring? = index + 1 < arguments.count ? Substring(arguments[index + 1]) : nil
            if let equals = argument.firstIndex(of: "="), argument.hasPrefix("--") {
                option = String(argument[..<equals])
                value = argument[argument.index(after: equals)...]
            }
            let applies = inputSeekOptions.contains(option) ? index < lastInput : startOptions.contains(option)
            guard applies, let value else { continue }
            if option == "-sseof" || value.contains(where: { ("1"..."9").contains($0) }) { return true }
        }
        return false
    }

    /// `--scanners` text: `NAME,…` adds to the defaults, `=NAME,…`
    /// replaces them (`=` alone: no scanner, read classes off). Nil for a
    /// name that is empty or longer than 255 bytes.
    public static func scanners(from text: String, adding base: [String] = defaultScanners) -> [String]? {
        let replaces = text.hasPrefix("=")
        let list = replaces ? String(text.dropFirst()) : text
        var names: [String] = replaces ? [] : base
        if replaces && list.isEmpty { return [] }
        for name in list.split(separator: ",", omittingEmptySubsequences: false) {
            guard !name.isEmpty, name.utf8.count <= 255 else { return nil }
            names.append(String(name))
        }
        return names
    }
}
