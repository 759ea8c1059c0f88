// The bytes of an entry's `meta` file: versioned, human-readable text ending in an
// FNV-1a checksum line, so a torn or corrupted write decodes as an error, never as
// a plausible wrong entry, and numbers past Limits decode as an error too. No
// filesystem access; CacheStore decides what errors mean.
import MediaSupport

package enum MetaFormat {
    package static let version = 1

    private static let magic = "mediafs-meta"
    private static let checksumKey = "checksum"

    package static func encode(_ m: EntryMeta) -> [UInt8] {
        // Bytes, not Strings: `ls -l` of a 100,000-entry listing saves one
        // of these per probe answer, and appending Strings scalar by scalar
        // took a tenth of the daemon's time.
        var bytes: [UInt8] = []
        bytes.reserveCapacity(160 + m.url.utf8.count)
        bytes.append(contentsOf: magic.utf8)
        bytes.append(UInt8(ascii: " "))
        bytes.append(contentsOf: String(version).utf8)
        bytes.append(UInt8(ascii: "\n"))
        func line(_ key: StaticString, _ value: String) {
            key.withUTF8Buffer { bytes.append(contentsOf: $0) }
            bytes.append(UInt8(ascii: " "))
            // A newline inside a value would forge another field. Bytes of
            // the UTF-8 form: a CR or LF byte is never part of another
            // scalar's encoding, so "\r\n" (one Character) goes too.
            for byte in value.utf8 where byte != UInt8(ascii: "\n") && byte != UInt8(ascii: "\r") {
                bytes.append(byte)
            }
            bytes.append(UInt8(ascii: "\n"))
        }
        line("url", m.url)
        line("length", String(m.info.length))
        if let v = m.info.contentType { line("type", v) }
        if let v = m.info.etag { line("etag", v) }
        if let v = m.info.lastModified { line("last-modified", v) }
        line("accept-ranges", m.info.acceptsRanges ? "1" : "0")
        line("present", m.present.description)
        line("complete", m.isComplete ? "1" : "0")
        // Only when set: an unpinned entry keeps the bytes older versions
        // write, and metadata without the line decodes as unpinned.
        if m.pinned { line("pinned", "1") }
        // The same: metadata without it is a player's (as every entry was
        // before read classes were kept).
        if m.scanOnly { line("scan-only", "1") }
        line("accessed", String(m.lastAccess))
        line("validated", String(m.lastValidated))
        let sum = fnv1a64(bytes)
        bytes.append(contentsOf: checksumKey.utf8)
        bytes.append(UInt8(ascii: " "))
        bytes.append(contentsOf: hex16(sum).utf8)
        bytes.append(UInt8(ascii: "\n"))
        return bytes
    }

    package static func decode(_ bytes: [UInt8]) throws -> EntryMeta {
        let newline = UInt8(ascii: "\n")

        // Magic and version come before the checksum: a later version may
        // checksum differently, and should be reported as what it is.
        guard let firstEnd = bytes.firstIndex(of: newline) else {
            if Array(magic.utf8).starts(with: bytes.prefix(magic.utf8.count)) { throw failure("truncated") }
            throw failure("bad magic")
        }
        let header = String(decoding: bytes[..<firstEnd], as: UTF8.self)
        guard header.hasPrefix(magic + " ") else { throw failure("bad magic") }
        let versionText = header.dropFirst(magic.count + 1)
        guard let fileVersion = parseNumber(versionText, allowNegative: false) else { throw failure("bad magic") }
        guard fileVersion == version else { throw failure("unknown metadata version \(fileVersion)") }

        guard bytes.last == newline else { throw failure("truncated") }
        let lastStart = (bytes[..<(bytes.count - 1)].lastIndex(of: newline) ?? -1) + 1
        let lastLine = String(decoding: bytes[lastStart..<(bytes.count - 1)], as: UTF8.self)
        guard lastStart > firstEnd, lastLine.hasPrefix(checksumKey + " ") else { throw failure("truncated") }
        let stored = lastLine.dropFirst(checksumKey.count + 1)
        guard stored.count == 16, let storedSum = UInt64(stored, radix: 16) else { throw failure("bad checksum line") }
        guard storedSum == fnv1a64(bytes[..<lastStart]) else { throw failure("checksum mismatch") }

        var fields: [String: String] = [:]
        for raw in bytes[(firstEnd + 1)..<lastStart].split(separator: newline, omittingEmptySubsequences: false).dropLast() {
            // Bytes, not Characters: a remount of a big listing decodes
            // one of these per entry. Encode never writes a carriage
            // return; one here is damage.
            guard !raw.contains(UInt8(ascii: "\r")), let space = raw.firstIndex(of: UInt8(ascii: " ")) else {
                throw failure("bad field line '\(String(decoding: raw, as: UTF8.self))'")
            }
            let key = String(decoding: raw[..<space], as: UTF8.self)
            guard knownKeys.contains(key) else { throw failure("unknown field '\(key)'") }
            guard fields[key] == nil else { throw failure("duplicate field '\(key)'") }
            fields[key] = String(decoding: raw[(space + 1)...], as: UTF8.self)
        }

        func required(_ key: String) throws -> String {
            guard let v = fields[key] else { throw failure("missing field '\(key)'") }
            return v
        }
        func number(_ key: String, in bounds: ClosedRange<Int64>) throws -> Int64 {
            guard let n = parseNumber(Substring(try required(key)), allowNegative: bounds.lowerBound < 0),
                  bounds.contains(n) else {
                throw failure("bad field '\(key)'")
            }
            return n
        }
        func flag(_ key: String) throws -> Bool {
            switch try required(key) {
            case "1": return true
            case "0": return false
            default: throw failure("bad field '\(key)'")
            }
        }

        // Bounded like the network's numbers, so arithmetic on a decoded entry cannot overflow.
        let length = try number("length", in: 0...Limits.maxLength)
        guard let present = ByteRangeSet(parsing: try required("present")) else { throw failure("bad field 'present'") }
        if let end = present.ranges.last?.upperBound, end > length {
            throw failure("bad field 'present': ranges end at \(end), past length \(length)")
        }
        let info = ContentInfo(length: length, contentType: fields["type"], etag: fields["etag"],
                               lastModified: fields["last-modified"], acceptsRanges: try flag("accept-ranges"))
        let meta = EntryMeta(url: try required("url"), info: info, present: present,
                             lastAccess: try number("accessed", in: Limits.unixSeconds),
                             lastValidated: try number("validated", in: Limits.unixSeconds),
                             pinned: fields["pinned"] == nil ? false : try flag("pinned"),
                             scanOnly: fields["scan-only"] == nil ? false : try flag("scan-only"))
        guard try flag("complete") == meta.isComplete else {
            throw failure("bad field 'complete': disagrees with present ranges and length")
        }
        return meta
    }

    private static let knownKeys: Set<String> = [
        "url", "length", "type", "etag", "last-modified", "accept-ranges",
        "present", "complete", "accessed", "validated", "pinned", "scan-only",
    ]

    private static func failure(_ reason: String) -> MediaError {
        MediaError.io(reason)
    }

    /// Digits only (and a leading minus when allowed): Int64(_:) alone would
    /// also take "+5", which encode never writes.
    package static func parseNumber(_ s: Substring, allowNegative: Bool) -> Int64? {
        let digits = allowNegative && s.hasPrefix("-") ? s.dropFirst() : s
        guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            return nil
        }
        return Int64(s)
    }

    package static func fnv1a64<C: Collection>(_ bytes: C) -> UInt64 where C.Element == UInt8 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in bytes {
            hash ^= UInt64(b)
            hash &*= 0x0000_0100_0000_01b3
        }
        return hash
    }

    private static func hex16(_ v: UInt64) -> String {
        let s = String(v, radix: 16)
        return String(repeating: "0", count: 16 - s.count) + s
    }
}
