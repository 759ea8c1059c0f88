// Names in the mount root: taken from the URL's last path component, made
// safe for a directory entry, and made unique in source order.
import Foundation

public struct FileNaming {
    /// Linux's NAME_MAX, in bytes.
    static let maxNameBytes = 255

    private var taken: Set<String> = []

    public init() {}

    /// The name for a URL: its last path component, percent-decoded.
    public static func name(forURL url: String) -> String {
        let components = URLComponents(string: url)
        let path = components?.percentEncodedPath ?? ""
        let last = path.split(separator: "/").last.map(String.init) ?? ""
        let decoded = last.removingPercentEncoding ?? last
        return safe(decoded.isEmpty ? (components?.host ?? "index") : decoded)
    }

    /// No `/`, no NUL or other control characters, never `.` or `..`, at
    /// most NAME_MAX bytes (cut on a character boundary).
    public static func safe(_ raw: String) -> String {
        var name = String(String.UnicodeScalarView(raw.unicodeScalars.map { scalar in
            scalar == "/" || scalar.value < 0x20 || scalar.value == 0x7f ? "_" : scalar
        }))
        if name.isEmpty || name == "." || name == ".." { name = "_" + name }
        while name.utf8.count > maxNameBytes { name.removeLast() }
        return name
    }

    /// Returns `name`, or `name (2)`, `name (3)`… before the extension when
    /// an earlier source took it.
    public mutating func claim(_ name: String) -> String {
        var candidate = name
        var counter = 2
        while taken.contains(candidate) {
            let dot = name.lastIndex(of: ".").flatMap { $0 == name.startIndex ? nil : $0 }
            let stem = dot.map { String(name[..<$0]) } ?? name
            let ext = dot.map { String(name[$0...]) } ?? ""
            candidate = FileNaming.safe("\(stem) (\(counter))") + ext
            counter += 1
        }
        taken.insert(candidate)
        return candidate
    }
}
