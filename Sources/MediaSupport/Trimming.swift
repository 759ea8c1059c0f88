// Text as people and servers write it: a value between spaces (a header, a
// size on the command line, a name in a list file).

extension StringProtocol {
    /// The text without leading and trailing white space.
    package var trimmingSpaces: Substring {
        let s = Substring(self)
        guard let first = s.firstIndex(where: { !$0.isWhitespace }) else { return s[s.endIndex...] }
        let last = s.lastIndex(where: { !$0.isWhitespace })!
        return s[first...last]
    }
}
