// Who a process is, as a reader's account names it: its pid and start time
// (a reused pid is another process), its name, a short form of its command
// line and its parent's name. The command line is cut and stripped of what
// may be a secret (a URL's user, password and query: a Plex transcoder's
// `-progressurl` carries a token), because it reaches `status` and the log.

public struct ReaderProcess: Sendable, Equatable, Hashable {
    public var pid: Int32
    public var startTime: UInt64
    /// Its `comm`: at most 15 bytes of its executable's name.
    public var name: String
    /// Its command line, short (`shortForm`).
    public var arguments: String
    /// Its parent's `comm` ("" when it cannot be read).
    public var parentName: String

    public init(pid: Int32, startTime: UInt64, name: String, arguments: String, parentName: String) {
        self.pid = pid
        self.startTime = startTime
        self.name = name
        self.arguments = arguments
        self.parentName = parentName
    }

    /// A short form is at most this many bytes (a status line, an xattr
    /// of many readers).
    public static let argumentsLimit = 160
    /// Each argument is cut at this many bytes: a path's tail says little
    /// more than its head.
    static let argumentLimit = 64

    /// The command line as a person reads it: the executable's base name,
    /// then each argument cut at `argumentLimit` bytes, control characters
    /// (a script's newlines) as spaces, URLs without user, password or
    /// query, the whole cut at `argumentsLimit`.
    public static func shortForm(_ arguments: [String]) -> String {
        var words: [String] = []
        for (index, argument) in arguments.enumerated() where !(index > 0 && argument.isEmpty) {
            var word = index == 0 ? String(argument.split(separator: "/").last ?? Substring(argument)) : argument
            word = withoutSecrets(String(word.map { $0.isASCII && ($0.asciiValue! < 0x20 || $0.asciiValue! == 0x7F) ? " " : $0 }))
            words.append(cut(word, to: argumentLimit))
        }
        return cut(words.joined(separator: " "), to: argumentsLimit)
    }

    /// `scheme://user:password@host/path?query` → `scheme://host/path`;
    /// anything else as it is.
    static func withoutSecrets(_ word: String) -> String {
        guard let schemeEnd = word.range(of: "://") else { return word }
        let scheme = word[..<schemeEnd.lowerBound]
        var rest = word[schemeEnd.upperBound...]
        if let query = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) { rest = rest[..<query] }
        let authorityEnd = rest.firstIndex(of: "/") ?? rest.endIndex
        if let at = rest[..<authorityEnd].lastIndex(of: "@") { rest = rest[rest.index(after: at)...] }
        return scheme + "://" + rest
    }

    /// At most `limit` bytes, cut at a character, with "…" when cut.
    static func cut(_ text: String, to limit: Int) -> String {
        guard text.utf8.count > limit else { return text }
        var kept = ""
        for character in text {
            if kept.utf8.count + String(character).utf8.count > limit - 3 { break }
            kept.append(character)
        }
        return kept + "…"
    }
}
