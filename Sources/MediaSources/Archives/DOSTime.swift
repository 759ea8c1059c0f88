// The MS-DOS date and time RAR4 and ZIP headers carry: 2-second steps from
// 1980, in the packer's local time.
import Foundation
import MediaSupport
import MediaStore
import MediaNetwork

enum DOSTime {
    /// An MS-DOS date and time as Unix seconds, read as UTC (RAR4 and ZIP keep
    /// the packer's local time and not its zone); nil when not a real date.
    static func seconds(_ value: UInt32) -> Int64? {
        let date = value >> 16, time = value & 0xFFFF
        var parts = DateComponents()
        parts.year = Int(date >> 9) + 1980
        parts.month = Int((date >> 5) & 0x0F)
        parts.day = Int(date & 0x1F)
        parts.hour = Int(time >> 11)
        parts.minute = Int((time >> 5) & 0x3F)
        parts.second = Int(time & 0x1F) * 2
        guard (1...12).contains(parts.month!), (1...31).contains(parts.day!), parts.hour! < 24, parts.minute! < 60,
              parts.second! < 60 else { return nil }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar.date(from: parts).map { Int64($0.timeIntervalSince1970) }
    }
}
