// Groups a directory's file names into RAR volume sets: "name.partNN.rar"
// (any width of NN) and "name.rar" with "name.r00", "name.r01"..., and
// names the folder a set shows as. Names only say which file to read
// first and which belong together; the volumes' order is their headers'
// (`RAR5Index`, `RAR4Index`).

public struct RARVolumeSet: Equatable, Sendable {
    /// What the set shows as: "film" for film.part01.rar or film.rar.
    public var folder: String
    /// The first volume's name: the lowest part number, or the ".rar".
    public var first: String
    /// Every name of the set, the first first, then by number.
    public var names: [String]

    /// The sets among `names`, in the order of their first names; names in
    /// no set are left out.
    public static func group(_ names: [String]) -> [RARVolumeSet] {
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
