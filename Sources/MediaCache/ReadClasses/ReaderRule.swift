// A rule that names the class of a process: by its name and words of its
// command line, or by its parent's name. The user's rules
// (`--reader-class`) are asked first, then the defaults below, the job
// shapes of the media servers (read from Jellyfin 10.10/10.11's source,
// Plex's and the intro-skipper plugin's docs); a process no rule names is
// a scan by its name (`--scanners`) or its one-frame arguments, else a
// player.
public struct ReaderRule: Sendable, Equatable {
    /// The process's name as the kernel keeps it (15 bytes); nil: any.
    public var name: String?
    /// Its parent's name; nil: any.
    public var parent: String?
    /// Each appears in its arguments (after the executable), as a whole
    /// argument or inside one.
    public var words: [String]
    public var readClass: ReadClass
    /// Why, as the man page and the log say it.
    public var reason: String

    public init(name: String?, parent: String? = nil, words: [String] = [], readClass: ReadClass, reason: String) {
        self.name = name.map(ProcessClassifier.comm)
        self.parent = parent.map(ProcessClassifier.comm)
        self.words = words
        self.readClass = readClass
        self.reason = reason
    }

    func matches(name: String, parent: String, arguments: [String]) -> Bool {
        if let wanted = self.name, wanted != name { return false }
        if let wanted = self.parent, wanted != parent { return false }
        let given = arguments.dropFirst()
        return words.allSatisfy { word in given.contains { $0.contains(word) } }
    }

    /// The jobs no one watches, as their command lines show them. Not here:
    /// a viewer's transcode or remux (`-f hls`, a progressive output), a
    /// primary or chapter image (`-vframes 1`: a scan, one frame), the
    /// fonts of a file (`-dump_attachment … -t 0`: its head, which a viewer
    /// waits for): those play.
    public static let defaults: [ReaderRule] = [
        ReaderRule(name: "ffmpeg", words: ["chromaprint"], readClass: .background,
                   reason: "intro detection's audio fingerprint"),
        ReaderRule(name: "ffmpeg", words: ["ebur128"], readClass: .background, reason: "loudness analysis"),
        ReaderRule(name: "ffmpeg", words: ["silencedetect"], readClass: .background, reason: "intro and credits detection"),
        ReaderRule(name: "ffmpeg", words: ["blackframe"], readClass: .background, reason: "intro and credits detection"),
        ReaderRule(name: "ffmpeg", words: ["blackdetect"], readClass: .background, reason: "intro and credits detection"),
        ReaderRule(name: "ffmpeg", words: ["signalstats"], readClass: .background, reason: "intro and credits detection"),
        ReaderRule(name: "ffmpeg", words: ["-skip_frame", "nokey"], readClass: .background,
                   reason: "trickplay: every keyframe of the file"),
        ReaderRule(name: "ffmpeg", words: ["fps=", "image2"], readClass: .background,
                   reason: "trickplay: an image every few seconds of the file"),
        // A viewer may wait on it, yet it reads the whole file at line rate
        // for a few kilobytes of text, is not stopped when playback stops,
        // and the same command runs as a scheduled task for a library:
        // behind the viewer's own stream, not beside it.
        ReaderRule(name: "ffmpeg", words: ["-an", "-vn", "-c:s"], readClass: .background,
                   reason: "subtitle extraction: the whole file for its text"),
        ReaderRule(name: "ffprobe", words: ["-skip_frame", "nokey"], readClass: .background,
                   reason: "keyframe extraction: every packet of the file"),
        ReaderRule(name: "ffprobe", words: ["packet=pts_time"], readClass: .background,
                   reason: "keyframe extraction: every packet of the file"),
        ReaderRule(name: "Plex Transcoder", words: ["-skip_frame:v", "nokey"], readClass: .background,
                   reason: "Plex preview thumbnails"),
        ReaderRule(name: "Plex Media Scanner", words: ["--analyze-deeply"], readClass: .background,
                   reason: "Plex deep media analysis"),
        ReaderRule(name: "Plex Media Scanner", words: ["--generate"], readClass: .background,
                   reason: "Plex media index generation"),
        ReaderRule(name: "Plex Media Scanner", words: ["--server-action"], readClass: .background,
                   reason: "Plex intro and credits detection"),
    ]

    /// `--reader-class` text: `NAME [WORD…]=CLASS` (NAME `*`: any
    /// process) or `parent:NAME=CLASS`; CLASS play, scan or background.
    /// Nil, with what was wrong, for anything else.
    public static func parse(_ text: String) -> Result<ReaderRule, ParseError> {
        guard let equals = text.lastIndex(of: "=") else { return .failure(ParseError("no '=CLASS'")) }
        let label = text[text.index(after: equals)...]
        guard let readClass = ReadClass.allCases.first(where: { $0.label == label }) else {
            return .failure(ParseError("'\(label)' is not a class (play, scan or background)"))
        }
        let words = text[..<equals].split(separator: " ").map(String.init)
        guard let first = words.first else { return .failure(ParseError("no process name before '='")) }
        guard text.utf8.count <= 1024, words.allSatisfy({ $0.utf8.count <= 255 }) else {
            return .failure(ParseError("longer than a rule can be"))
        }
        if first.hasPrefix("parent:") {
            let parent = String(first.dropFirst("parent:".count))
            guard !parent.isEmpty else { return .failure(ParseError("'parent:' needs a name")) }
            return .success(ReaderRule(name: nil, parent: parent, words: Array(words.dropFirst()), readClass: readClass,
                                       reason: "--reader-class \(text)"))
        }
        return .success(ReaderRule(name: first == "*" ? nil : first, words: Array(words.dropFirst()),
                                   readClass: readClass, reason: "--reader-class \(text)"))
    }

    public struct ParseError: Error, Equatable, Sendable {
        public var message: String
        init(_ message: String) { self.message = message }
    }
}
