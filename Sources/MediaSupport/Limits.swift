// Bounds on every number mediafs takes from outside (response headers, cache
// metadata, list files, xattrs, the command line). A parser refuses a value
// beyond them, so arithmetic on an accepted value cannot overflow Int64.

package enum Limits {
    /// The largest length, offset or size accepted: 2^62 bytes (4 EiB), far
    /// beyond any real file, yet with room to add a read size, round up to a
    /// block or sum two lengths without overflowing.
    package static let maxLength: Int64 = 1 << 62

    /// Unix seconds from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z: the
    /// years an HTTP date may name, and the span a stored timestamp may hold.
    package static let unixSeconds: ClosedRange<Int64> = -62_135_596_800...253_402_300_799

    /// The longest duration accepted (about 10,000 years): whole seconds of
    /// it still fit an Int, whichever way the caller converts it.
    package static let maxDuration: Double = 10_000 * 366 * 86_400

    /// The longest wait a Retry-After may ask for; the loader caps it further.
    package static let maxRetryAfter: Double = 86_400

    /// Whether `value` is a length or offset within bounds.
    package static func isLength(_ value: Int64) -> Bool {
        value >= 0 && value <= maxLength
    }

    /// Parses ASCII digits only (no sign, no spaces) as a length within
    /// bounds; nil for anything else, including values past `maxLength`.
    package static func length<S: StringProtocol>(_ text: S) -> Int64? {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
              let value = Int64(text), isLength(value) else { return nil }
        return value
    }
}

extension Int64 {
    /// a + b, held at Int64.max: for sums of sizes (never negative).
    package func addingSaturating(_ other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? .max : sum
    }
}
