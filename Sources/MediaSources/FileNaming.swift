// Names in the mount root: taken from the URL's last path component, made
// safe for a directory entry, and made unique in source order. A claim costs
// O(1) amortised however many names collide (a listing of 100,000 `index.html`).
// Which names are taken is the directory's to say (its children): a set of
// its own here held every name twice, 4 MiB at 100,000 entries.
import Foundation
import MediaSupport
import MediaStore
import MediaNetwork

package struct FileNaming {
    /// Linux's NAME_MAX, in bytes.
    static let maxNameBytes = 255
    /// A longer "extension" is taken as part of the name.
    static let maxExtensionBytes = 16

    /// For a name claimed more than once, the counter its next copy starts
    /// from, so the n-th copy does not try `(2)` to `(n)` again.
    private var nextCounter: [String: Int] = [:]

    package init() {}

    /// The name for a URL: its last path component, percent-decoded.
    package static func name(forURL url: String) -> String {
        let parsed = MediaURL(url)
        let last = String(parsed?.lastPathSegment ?? "")
        let decoded = last.removingPercentEncoding ?? last
        return safe(decoded.isEmpty ? (parsed?.host ?? "index") : decoded)
    }

    /// No `/`, no NUL or other control characters, never `.` or `..`, at
    /// most NAME_MAX bytes (cut on a character boundary).
    package static func safe(_ raw: String) -> String {
        var name = String(String.UnicodeScalarView(raw.unicodeScalars.map { scalar in
            scalar == "/" || scalar.value < 0x20 || scalar.value == 0x7f ? "_" : scalar
        }))
        if name.isEmpty || name == "." || name == ".." { name = "_" + name }
        while name.utf8.count > maxNameBytes { name.removeLast() }
        return name
    }

    /// Returns `name`, or `name (2)`, `name (3)`… before the extension when
    /// an earlier source took it; the stem is shortened so the whole name
    /// stays within NAME_MAX.
    /// `isTaken` says whether a name is taken already; the caller takes
    /// the one returned.
    package mutating func claim(_ name: String, isTaken: (String) -> Bool) -> String {
        let (unique, counter) = candidate(for: name, isTaken: isTaken)
        if unique != name { nextCounter[name] = counter }
        return unique
    }

    /// The name `claim` would return, without counting it.
    package func peek(_ name: String, isTaken: (String) -> Bool) -> String {
        candidate(for: name, isTaken: isTaken).name
    }

    /// The first free name for `name`, and the counter after the one it used.
    private func candidate(for name: String, isTaken: (String) -> Bool) -> (name: String, counter: Int) {
        let dot = name.lastIndex(of: ".").flatMap { $0 == name.startIndex ? nil : $0 }
        let ext = dot.map { String(name[$0...]) }.flatMap { $0.utf8.count <= Self.maxExtensionBytes ? $0 : nil } ?? ""
        let stem = String(name.dropLast(ext.count))
        var candidate = name
        var counter = nextCounter[name] ?? 2
        while isTaken(candidate) {
            let suffix = " (\(counter))"
            var shortened = stem
            while shortened.utf8.count + suffix.utf8.count + ext.utf8.count > Self.maxNameBytes {
                shortened.removeLast()
            }
            candidate = shortened + suffix + ext
            counter += 1
        }
        return (candidate, counter)
    }
}
