// Last-Modified as a file's mtime. HTTP dates are IMF-fixdate in practice
// ("Sun, 06 Nov 1994 08:49:37 GMT"); anything else, including a year outside
// 1–9999 or a field out of its range, reads as unknown.
import MediaSupport

public enum HTTPDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun",
                                 "jul", "aug", "sep", "oct", "nov", "dec"]

    /// Seconds since the epoch, within `Limits.unixSeconds`, or nil when the
    /// text is not an IMF-fixdate.
    /// Read as bytes, not Characters: every stat of a file, and every entry
    /// a listing hands out with its attributes, dates it.
    public static func seconds(_ text: String) -> Int? {
        let fields = text.utf8.split(separator: UInt8(ascii: " "))
        guard fields.count == 6, fields[5].elementsEqual("GMT".utf8),
              let day = number(fields[1], in: 1...31), let year = number(fields[3], in: 1...9999),
              let month = months.firstIndex(where: { $0.utf8.elementsEqual(fields[2].lazy.map(asciiLower)) })
        else { return nil }
        let clock = fields[4].split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
        // Second 60 is a leap second, which IMF-fixdate allows.
        guard clock.count == 3, let hour = number(clock[0], in: 0...23), let minute = number(clock[1], in: 0...59),
              let second = number(clock[2], in: 0...60) else { return nil }
        let seconds = daysFromCivil(year: year, month: month + 1, day: day) * 86_400 + hour * 3600 + minute * 60 + second
        // "31 Dec 9999 23:59:60" would pass the last second of the range.
        return Limits.unixSeconds.contains(Int64(seconds)) ? seconds : nil
    }

    /// Digits only, at most four of them, so a hostile field never reaches
    /// Int's limits; nil outside `range`.
    private static func number(_ digits: Substring.UTF8View, in range: ClosedRange<Int>) -> Int? {
        guard (1...4).contains(digits.count) else { return nil }
        var value = 0
        for digit in digits {
            guard digit >= UInt8(ascii: "0") && digit <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int(digit - UInt8(ascii: "0"))
        }
        return range.contains(value) ? value : nil
    }

    /// Lower case for ASCII letters; no other byte becomes a letter.
    private static func asciiLower(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
    /// algorithm), because Glibc's strptime and timegm are not imported.
    /// Callers keep year within 1...9999, month 1...12 and day 1...31.
    public static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
