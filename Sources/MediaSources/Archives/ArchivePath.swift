// A member's name as a path mediafs may show: separators normalised to
// "/", and refused when it could escape the folder or name nothing (an
// absolute path, a drive letter, "..", ".", an empty component, a NUL),
// with "/" or "\" as the separator.

import Foundation
import MediaSupport
import MediaStore
import MediaNetwork

enum ArchivePath {
    /// The checked path; `backslashIsSeparator` for names written on
    /// Windows by RAR4 ("vols\bigfile.txt").
    static func checked(_ name: String, backslashIsSeparator: Bool) throws -> String {
        var text = name
        if backslashIsSeparator { text = text.replacingOccurrences(of: "\\", with: "/") }
        // A backslash is a separator to whoever shares the folder on to
        // Windows: no component between either may escape.
        let components = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "/" || $0 == "\\" })
        guard !text.isEmpty, !text.hasPrefix("/"), !text.unicodeScalars.contains("\0"),
              !(components.first?.count == 2 && components.first?.last == ":"),
              components.allSatisfy({ !$0.isEmpty && $0 != "." && $0 != ".." })
        else { throw ArchiveRefusal.unsafePath(name) }
        return text
    }
}
