// Sizes ("4M", "10G") and durations ("90s", "7d") as the command line and
// xattrs accept them. Binary multiples: K is 1024. Sizes past
// Limits.maxLength and durations past Limits.maxDuration are refused.

import Foundation

package enum Units {
    /// Bytes from a count with an optional K/M/G/T suffix (an optional
    /// trailing B or iB is accepted too: "4MiB").
    package static func bytes(_ text: String) -> Int64? {
        var body = Substring(text.trimmingSpaces).uppercased()[...]
        if body.hasSuffix("IB") { body = body.dropLast(2) } else if body.hasSuffix("B") { body = body.dropLast() }
        let multipliers: [Character: Int64] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40]
        var multiplier: Int64 = 1
        if let last = body.last, let factor = multipliers[last] {
            multiplier = factor
            body = body.dropLast()
        }
        guard let value = Int64(body), value >= 0 else { return nil }
        let (product, overflow) = value.multipliedReportingOverflow(by: multiplier)
        return overflow || product > Limits.maxLength ? nil : product
    }

    /// Seconds from a count with an optional s/m/h/d suffix (plain: seconds).
    /// NaN and infinity fail the bound check (an overflowing product is infinity).
    package static func seconds(_ text: String) -> Double? {
        var body = Substring(text.trimmingSpaces).lowercased()[...]
        let multipliers: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
        var multiplier = 1.0
        if let last = body.last, let factor = multipliers[last] {
            multiplier = factor
            body = body.dropLast()
        }
        guard let value = Double(body), value >= 0, value * multiplier <= Limits.maxDuration else { return nil }
        return value * multiplier
    }

    /// A byte count as people read it: "512 B", "1.5 MiB".
    package static func describe(_ bytes: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes)
        var unit = 0
        while abs(value) >= 1024 && unit < units.count - 1 { value /= 1024; unit += 1 }
        return unit == 0 ? "\(bytes) B" : String(format: "%.1f", value) + " " + units[unit]
    }
}
