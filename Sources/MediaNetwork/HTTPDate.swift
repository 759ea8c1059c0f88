// Last-Modified as a file's mtime. HTTP dates are IMF-fixdate in practice
// ("Sun, 06 Nov 1994 08:49:37 GMT"); anything else, including a year outside
// 1–9999 or a field out of its range, reads as unknown.
import MediaSupport

package enum HTTPDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun",
                                 "jul", "aug", "sep", "oct", "nov", "dec"]

    /// Seconds since the epoch, within `Limits.unixSeconds`, or nil when the
    /// text is not an IMF-fixdate.
    /// Read as bytes, not Characters: every stat of a file, and every entry
    /// a listing hands out with its attributes, dates it.
    package static func seconds(_ text: String) -> Int? {
        // Fields split at runs of spaces, by index: no array per call (a
        // probe answer of a big listing dates its entry on the way in).
        let utf8 = Substring(text).utf8
        var fields: (Substring.UTF8View, Substring.UTF8View, Substring.UTF8View,
                     Substring.UTF8View, Substring.UTF8View, Substring.UTF8View)
        let empty = utf8[utf8.startIndex..<utf8.startIndex]
        fields = (empty, empty, empty, empty, empty, empty)
        var count = 0
        var i = utf8.startIndex
        while i != utf8.endIndex {
            if utf8[i] == UInt8(ascii: " ") { utf8.formIndex(after: &i); continue }
            let start = i
            while i != utf8.endIndex && utf8[i] != UInt8(ascii: " ") { utf8.formIndex(after: &i) }
            let field = utf8[start..<i]
            switch count {
            case 0: fields.0 = field
            case 1: fields.1 = field
            case 2: fields.2 = field
            case 3: fields.3 = field
            case 4: fields.4 = field
            case 5: fields.5 = field
            default: return nil
            }
            count += 1
        }
        guard count == 6, fields.5.elementsEqual("GMT".utf8),
              let day = number(fields.1, in: 1...31), let year = number(fields.3, in: 1...9999),
              let month = months.firstIndex(where: { $0.utf8.elementsEqual(fields.2.lazy.map(asciiLower)) })
        else { return nil }
        // Exactly two colons; empty parts fail `number`.
        let clock = fields.4
        guard let firstColon = clock.firstIndex(of: UInt8(ascii: ":")) else { return nil }
        let rest = clock[clock.index(after: firstColon)...]
        guard let secondColon = rest.firstIndex(of: UInt8(ascii: ":")) else { return nil }
        let last = rest[rest.index(after: secondColon)...]
        // Second 60 is a leap second, which IMF-fixdate allows.
        guard !last.contains(UInt8(ascii: ":")),
              let hour = number(clock[..<firstColon], in: 0...23), let minute = number(rest[..<secondColon], in: 0...59),
              let second = number(last, in: 0...60) else { return nil }
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
    package static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// Seconds since the epoch as an IMF-fixdate (`Sun, 06 Dec 2026 17:00:00
    /// GMT`), the form Last-Modified takes: an SFTP listing's mtime as a
    /// file's date. Nil outside years 1–9999.
    package static func text(seconds: Int64) -> String? {
        guard abs(seconds) < 1 << 40 else { return nil }
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = Int(seconds - days * 86_400)
        // Howard Hinnant's civil_from_days, the inverse of daysFromCivil.
        let z = Int(days) + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        guard (1...9999).contains(year) else { return nil }
        let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][((Int(days) % 7) + 7) % 7]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let yearText = String(repeating: "0", count: 4 - String(year).count) + String(year)
        return "\(weekday), \(two(day)) \(months[month - 1]) \(yearText) \(two(secondOfDay / 3600)):"
            + "\(two(secondOfDay / 60 % 60)):\(two(secondOfDay % 60)) GMT"
    }
}
