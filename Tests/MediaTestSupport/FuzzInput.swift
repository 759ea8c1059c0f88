// Hostile text for the parser fuzz tests, drawn from a seeded SplitMix64 so a
// failing case replays exactly: numbers at and past every limit, near-miss
// syntax, and byte-level mutations (flips, cuts, splices) of valid text.
import MediaNetwork
import MediaSupport

struct FuzzInput {
    private var random: SplitMix64

    init(seed: UInt64) { random = SplitMix64(seed: seed) }

    mutating func below(_ bound: Int) -> Int { Int(random.next() % UInt64(bound)) }

    mutating func chance(_ oneIn: Int) -> Bool { below(oneIn) == 0 }

    mutating func pick<T>(_ choices: [T]) -> T { choices[below(choices.count)] }

    /// Numbers a parser must survive: around 0, around 2^31, 2^62, 2^63 and
    /// 2^64, with signs, exponents, spaces, leading zeros and far too many digits.
    static let numbers = [
        "0", "1", "7", "511", "512", "999", "1000", "2147483647", "2147483648", "4294967296",
        "4611686018427387903", "4611686018427387904", "4611686018427387905",
        "9223372036854775806", "9223372036854775807", "9223372036854775808", "18446744073709551615",
        "18446744073709551616", "99999999999999999", "99999999999999999999999999999999999999",
        "-1", "-0", "+5", "-9223372036854775808", "-9223372036854775809", "1e3", "1e400", "1.5", "0x10",
        "nan", "inf", "-inf", "", " ", " 5", "5 ", "00000000000000000000042", "١٢٣", "５",
        String(repeating: "9", count: 400),
    ]

    mutating func number() -> String {
        if chance(3) { return String(random.next() >> UInt64(below(64))) }
        return pick(Self.numbers)
    }

    /// `text` with up to a few random edits; sometimes returned unchanged.
    mutating func mutate(_ text: String) -> String {
        var bytes = Array(text.utf8)
        for _ in 0..<below(4) {
            switch below(6) {
            case 0 where !bytes.isEmpty:
                bytes[below(bytes.count)] ^= UInt8(1 << below(8))
            case 1 where !bytes.isEmpty:
                bytes.removeSubrange(below(bytes.count)...)
            case 2:
                bytes.insert(contentsOf: Array(number().utf8), at: below(bytes.count + 1))
            case 3:
                bytes.insert(pick(Array(" -/:,*\n\r\t\"'<>=#%&;\u{0}".utf8) + [0xFF, 0xC3]), at: below(bytes.count + 1))
            case 4 where !bytes.isEmpty:
                let start = below(bytes.count)
                bytes.removeSubrange(start..<min(bytes.count, start + 1 + below(8)))
            default:
                let start = below(bytes.count + 1)
                bytes.insert(contentsOf: bytes[start...].prefix(below(16)), at: below(bytes.count + 1))
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Random bytes read as UTF-8 (invalid sequences become U+FFFD).
    mutating func garbage(maxBytes: Int = 40) -> String {
        String(decoding: (0..<below(maxBytes + 1)).map { _ in UInt8(truncatingIfNeeded: random.next()) }, as: UTF8.self)
    }
}
