// Groups a directory's file names into RAR volume sets: "name.partNN.rar"
// (any width of NN) and "name.rar" with "name.r00", "name.r01"..., and
// names the folder a set shows as. Names only say which file to read
// first and which belong together; the volumes' order is their headers'
// (`RAR5Index`, `RAR4Index`).
import Foundation
import MediaSupport
import MediaStore
import MediaNetwork

package struct RARVolumeSet: Equatable, Sendable {
    /// What the set shows as: "film" for film.part01.rar or film.rar.
    package var folder: String
    /// The first volume's name: the lowest part number, or the ".rar".
    package var first: String
    /// Every name of the set, the first first, then by number.
    package var names: [String]

    /// The sets among `names`, in the order of their first names; names in
    /// no set are left out.
    package static func group(_ names: [String]) -> [RARVolumeSet] {
        var parts: [String: [(number: Int, name: String)]] = [:]
        var rars: [String: String] = [:]
        var olds: [String: [(number: Int, name: String)]] = [:]
        for name in names {
            if let (base, number) = numbered(name, prefix: ".part", suffix: ".rar") {
                parts[base, default: []].append((number, name))
            } else if let (base, number) = numbered(name, prefix: ".r", suffix: "") {
                olds[base, default: []].append((number, name))
            } else if name.lowercased().hasSuffix(".rar"), name.count > 4 {
                rars[String(name.dropLast(4))] = name
            }
        }
        var sets = parts.map { base, numbered in
            let sorted = numbered.sorted { $0.number < $1.number }
            return RARVolumeSet(folder: base, first: sorted[0].name, names: sorted.map(\.name))
        }
        for (base, name) in rars {
            let rest = (olds[base] ?? []).sorted { $0.number < $1.number }.map(\.name)
            sets.append(RARVolumeSet(folder: base, first: name, names: [name] + rest))
        }
        return sets.sorted { $0.first < $1.first }
    }

    /// Whether `name` may be an archive's (it ends `.zip`, `.rar` or `.r`
    /// and two digits or more, case aside): a look at its last bytes only,
    /// before any name is grouped.
    package static func mayNameAnArchive(_ name: String) -> Bool {
        var tail: [UInt8] = []
        for byte in name.utf8.reversed() {
            tail.append(byte | 0x20)    // ASCII letters to lower case; digits and '.' unchanged
            if byte == UInt8(ascii: ".") || tail.count > 8 { break }
        }
        // `tail` is the name's end, reversed, up to and with its last dot.
        if tail == Array("piz.".utf8) || tail == Array("rar.".utf8) { return true }
        guard tail.count >= 4, tail.last == UInt8(ascii: "."), tail[tail.count - 2] == UInt8(ascii: "r") else {
            return false
        }
        return tail.dropLast(2).allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }

    /// How a volume's name numbers its set: "film.part07.rar" (`.part`,
    /// numbers from 1, at the width the name has) or "film.rar", "film.r00"
    /// (`.old`: the `.rar` is number -1, then `.r` and two digits or more).
    /// The name's own case is kept in the names it makes.
    package struct Numbering: Equatable, Sendable {
        package enum Style: Sendable { case part, old }
        package var base: String
        package var style: Style
        package var number: Int
        /// Digits the name's number has (0-padded to it).
        package var width: Int
        /// What comes between the base and the digits (".part", ".r"), and
        /// after them (".rar", ""), as the name spells them.
        var infix: String
        var suffix: String

        /// The first volume's number.
        package var first: Int { style == .part ? 1 : -1 }

        /// The name of volume `number` of the set.
        package func name(number: Int) -> String {
            if style == .old, number < 0 { return base + (infix == ".R" ? ".RAR" : ".rar") }
            let digits = String(number)
            return base + infix + String(repeating: "0", count: max(0, width - digits.count)) + digits + suffix
        }
    }

    /// How `name` numbers its set; nil when it is no RAR volume's name.
    package static func numbering(of name: String) -> Numbering? {
        let bytes = Array(name.utf8)
        func piece(_ from: Int, _ count: Int) -> String { String(decoding: bytes[from..<(from + count)], as: UTF8.self) }
        if let (base, number) = numbered(name, prefix: ".part", suffix: ".rar") {
            let start = base.utf8.count, width = bytes.count - start - 9
            return Numbering(base: base, style: .part, number: number, width: width,
                             infix: piece(start, 5), suffix: piece(bytes.count - 4, 4))
        }
        if let (base, number) = numbered(name, prefix: ".r", suffix: "") {
            let start = base.utf8.count
            return Numbering(base: base, style: .old, number: number, width: bytes.count - start - 2,
                             infix: piece(start, 2), suffix: "")
        }
        guard name.lowercased().hasSuffix(".rar"), bytes.count > 4 else { return nil }
        let base = String(decoding: bytes.dropLast(4), as: UTF8.self)
        return Numbering(base: base, style: .old, number: -1, width: 2,
                         infix: piece(bytes.count - 4, 2), suffix: "")
    }

    /// "film.part01.rar" -> ("film", 1); "film.r00" -> ("film", 0): the base
    /// and number of `name` when it ends with `prefix`, digits, `suffix`
    /// (case aside).
    private static func numbered(_ name: String, prefix: String, suffix: String) -> (String, Int)? {
        let lower = Array(name.lowercased().utf8)
        let prefixBytes = Array(prefix.utf8), suffixBytes = Array(suffix.utf8)
        guard lower.count == name.utf8.count, lower.count > prefixBytes.count + suffixBytes.count,
              lower.suffix(suffixBytes.count).elementsEqual(suffixBytes) else { return nil }
        let digitsEnd = lower.count - suffixBytes.count
        var digitsStart = digitsEnd
        while digitsStart > 0, lower[digitsStart - 1] >= UInt8(ascii: "0"), lower[digitsStart - 1] <= UInt8(ascii: "9") {
            digitsStart -= 1
        }
        let digits = digitsEnd - digitsStart
        let baseEnd = digitsStart - prefixBytes.count
        guard digits > 0, digits <= 6, baseEnd > 0, (prefix != ".r" || digits >= 2),
              lower[baseEnd..<digitsStart].elementsEqual(prefixBytes),
              let number = Int(String(decoding: lower[digitsStart..<digitsEnd], as: UTF8.self)) else { return nil }
        return (String(decoding: Array(name.utf8)[..<baseEnd], as: UTF8.self), number)
    }
}
