// Last-Modified as a file's mtime. HTTP dates are IMF-fixdate in practice
// ("Sun, 06 Nov 1994 08:49:37 GMT"); anything else reads as unknown.

enum HTTPDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun",
                                 "jul", "aug", "sep", "oct", "nov", "dec"]

    /// Seconds since the epoch, or nil when the text is not an IMF-fixdate.
    static func seconds(_ text: String) -> Int? {
        let fields = text.split(separator: " ")
        guard fields.count == 6, fields[5] == "GMT",
              let day = Int(fields[1]), let year = Int(fields[3]),
              let month = months.firstIndex(of: fields[2].lowercased()) else { return nil }
        let clock = fields[4].split(separator: ":").compactMap { Int($0) }
        guard clock.count == 3 else { return nil }
        return daysFromCivil(year: year, month: month + 1, day: day) * 86_400
            + clock[0] * 3600 + clock[1] * 60 + clock[2]
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
    /// algorithm), because Glibc's strptime and timegm are not imported.
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
