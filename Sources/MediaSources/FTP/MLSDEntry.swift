// One line of an FTP server's MLSD answer (RFC 3659, 7.2): `fact=value;`
// facts, a space, the name. The facts read are `type` (file, dir; cdir
// and pdir are the directory itself and its parent), `size` and `modify`
// (YYYYMMDDHHMMSS[.fff], UTC). A machine format, unlike LIST's `ls -l`
// text: a size and a time to the second. Every number bounded; a line
// that does not read is nil.
import Foundation
import MediaSupport
import MediaNetwork

package struct MLSDEntry: Sendable, Equatable {
    package enum Kind: Sendable, Equatable { case file, directory, other }

    package var name: String
    package var kind: Kind
    package var size: Int64?
    /// Seconds since the epoch.
    package var modified: Int64?

    /// A line longer than this is no listing's.
    package static let maxLine = 8192

    package init(name: String, kind: Kind, size: Int64? = nil, modified: Int64? = nil) {
        self.name = name
        self.kind = kind
        self.size = size
        self.modified = modified
    }

    /// The entry a line gives; nil for one that does not read, or that
    /// names the directory itself or its parent.
    package init?(line raw: Substring) {
        let line = raw.hasSuffix("\r") ? raw.dropLast() : raw
        guard line.utf8.count <= Self.maxLine, let space = line.firstIndex(of: " ") else { return nil }
        let name = String(line[line.index(after: space)...])
        guard !name.isEmpty, name != ".", name != "..", !name.contains("/"), !name.contains("\0") else { return nil }
        var kind = Kind.other
        var size: Int64?
        var modified: Int64?
        for fact in line[..<space].split(separator: ";") {
            guard let equals = fact.firstIndex(of: "=") else { continue }
            let value = fact[fact.index(after: equals)...]
            switch fact[..<equals].lowercased() {
            case "type":
                switch value.lowercased() {
                case "file": kind = .file
                case "dir": kind = .directory
                case "cdir", "pdir": return nil
                default: kind = .other
                }
            case "size":
                size = Limits.length(value)
            case "modify":
                modified = Self.seconds(value)
            default:
                break
            }
        }
        self.init(name: name, kind: kind, size: size, modified: modified)
    }

    /// The entries of an MLSD answer, in the server's order.
    package static func entries(_ text: String) -> [MLSDEntry] {
        // "\r\n" is one Character in Swift: split on it as on "\n".
        text.split(whereSeparator: { $0 == "\n" || $0 == "\r\n" }).compactMap { MLSDEntry(line: $0) }
    }

    /// `YYYYMMDDHHMMSS`, a fraction allowed, as seconds since the epoch;
    /// nil unless such a UTC time in years 1–9999.
    static func seconds(_ text: Substring) -> Int64? {
        let digits = Array(text.prefix { $0 != "." }.utf8)
        guard digits.count == 14, digits.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
        func number(_ from: Int, _ count: Int) -> Int {
            digits[from..<(from + count)].reduce(0) { $0 * 10 + Int($1 - 48) }
        }
        let (year, month, day) = (number(0, 4), number(4, 2), number(6, 2))
        let (hour, minute, second) = (number(8, 2), number(10, 2), number(12, 2))
        guard (1...9999).contains(year), (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60,
              second <= 60 else { return nil }
        let days = Int64(HTTPDate.daysFromCivil(year: year, month: month, day: day))
        return days * 86_400 + Int64(hour * 3600 + minute * 60 + second)
    }
}
