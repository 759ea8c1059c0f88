// Where a ZIP's central directory lies, from the end of the file: the end
// record (searched back from the end over its comment), the ZIP64 locator
// and record when a field is saturated, and the base offset prepended data
// (a self-extractor stub) adds to every offset the archive states.
import Glibc
import MediaSupport
import Foundation
import MediaStore
import MediaNetwork

struct ZipDirectory {
    /// Absolute, in the file.
    var range: Range<Int64>
    var entries: Int
    /// Added to every offset the archive states.
    var base: Int64

    enum Lookup {
        case found(ZipDirectory)
        /// The bytes to read before it can be found.
        case wants(Range<Int64>)
    }

    static func locate(in volume: ArchiveVolume) throws -> Lookup {
        let span = min(volume.length, ZipIndex.tailBytes)
        guard span >= 22 else { throw MediaError(EINVAL, "\(volume.name): \(volume.length) bytes is too short for a ZIP") }
        let read = min(span, volume.readAtEnd)
        let wholeTail = (volume.length - span)..<volume.length
        guard read >= 22 else { return .wants(wholeTail) }
        let tailStart = volume.length - read
        guard let tail = volume.bytes(tailStart..<volume.length) else { return .wants(wholeTail) }
        var found: (at: Int64, record: ArraySlice<UInt8>)?
        var position = tail.endIndex - 22
        while position >= tail.startIndex {
            if tail[position] == 0x50, tail[position + 1] == 0x4B, tail[position + 2] == 0x05, tail[position + 3] == 0x06 {
                let commentLength = Int(tail[position + 20]) | Int(tail[position + 21]) << 8
                if position + 22 + commentLength <= tail.endIndex {
                    found = (tailStart + Int64(position - tail.startIndex), tail[position..<(position + 22)])
                    break
                }
            }
            position -= 1
        }
        guard let (endAt, record) = found else {
            if read < span { return .wants(wholeTail) }
            throw MediaError(EINVAL, "\(volume.name): no ZIP end record in its last \(span) bytes")
        }
        var end = ByteCursor(record.dropFirst(4), origin: "\(volume.name) at \(endAt), end record")
        let disk = try end.u16("disk number"), directoryDisk = try end.u16("central directory disk")
        _ = try end.u16("entries on this disk")
        var entries = UInt64(try end.u16("entries"))
        var size = UInt64(try end.u32("central directory size"))
        var offset = UInt64(try end.u32("central directory offset"))
        var directoryEnd = endAt
        if entries == 0xFFFF || size == 0xFFFF_FFFF || offset == 0xFFFF_FFFF || locator(volume, before: endAt) != nil {
            guard let locatorAt = locator(volume, before: endAt) else {
                throw end.failure("saturated fields and no ZIP64 locator before it")
            }
            let recordAt: Int64
            switch try zip64RecordStart(volume, locatorAt: locatorAt) {
            case .success(let start): recordAt = start
            case .failure(let unread): return .wants(unread.range)
            }
            guard let record = volume.bytes(recordAt..<(recordAt + 56)) else { return .wants(recordAt..<(recordAt + 56)) }
            var zip64 = ByteCursor(record.dropFirst(16), origin: "\(volume.name) at \(recordAt), ZIP64 end record")
            let disk64 = try zip64.u32("disk number"), directoryDisk64 = try zip64.u32("central directory disk")
            guard disk64 == 0, directoryDisk64 == 0 else { throw zip64.failure("spanned over disks") }
            _ = try zip64.bytes(8, "entries on this disk")
            entries = try u64(&zip64, "entries")
            size = try u64(&zip64, "central directory size")
            offset = try u64(&zip64, "central directory offset")
            directoryEnd = recordAt
        } else {
            guard disk == 0, directoryDisk == 0 else { throw end.failure("spanned over disks") }
        }
        let origin = "\(volume.name) at \(endAt), end record"
        guard entries <= UInt64(ZipIndex.maxEntries) else { throw MediaError(EINVAL, "\(origin): \(entries) entries, past \(ZipIndex.maxEntries)") }
        guard size <= UInt64(ZipIndex.maxDirectory), size >= entries * 46 else {
            throw MediaError(EINVAL, "\(origin): a central directory of \(size) bytes for \(entries) entries")
        }
        guard offset <= UInt64(Limits.maxLength), Int64(size) <= directoryEnd, Int64(offset) <= directoryEnd - Int64(size) else {
            throw MediaError(EINVAL, "\(origin): central directory offset \(offset) lies past its end")
        }
        let base = directoryEnd - Int64(size) - Int64(offset)
        return .found(ZipDirectory(range: (base + Int64(offset))..<directoryEnd, entries: Int(entries), base: base))
    }

    /// Where a ZIP64 locator sits: just before the end record.
    private static func locator(_ volume: ArchiveVolume, before endAt: Int64) -> Int64? {
        guard endAt >= 20, let bytes = volume.bytes((endAt - 20)..<(endAt - 16)),
              bytes.elementsEqual([0x50, 0x4B, 0x06, 0x07]) else { return nil }
        return endAt - 20
    }

    /// The ZIP64 end record's start: just before the locator (as Python's
    /// zipfile reads it, whatever prepended data did to the offset the
    /// locator states), else where the locator says, once read.
    private static func zip64RecordStart(_ volume: ArchiveVolume, locatorAt: Int64) throws -> Result<Int64, Unread> {
        if locatorAt >= 56, let bytes = volume.bytes((locatorAt - 56)..<(locatorAt - 52)),
           bytes.elementsEqual([0x50, 0x4B, 0x06, 0x06]) {
            return .success(locatorAt - 56)
        }
        guard let locator = volume.bytes(locatorAt..<(locatorAt + 20)) else { return .failure(Unread(range: locatorAt..<(locatorAt + 20))) }
        guard locatorAt >= 56 else { throw MediaError(EINVAL, "\(volume.name) at \(locatorAt): a ZIP64 locator with no room for its record") }
        var cursor = ByteCursor(locator.dropFirst(8), origin: "\(volume.name) at \(locatorAt), ZIP64 locator")
        let stated = try u64(&cursor, "ZIP64 end record offset")
        guard stated <= UInt64(locatorAt - 56) else { throw cursor.failure("ZIP64 end record offset \(stated) lies past the locator") }
        guard let bytes = volume.bytes(Int64(stated)..<(Int64(stated) + 4)) else {
            return .failure(Unread(range: Int64(stated)..<(Int64(stated) + 56)))
        }
        guard bytes.elementsEqual([0x50, 0x4B, 0x06, 0x06]) else { throw cursor.failure("no ZIP64 end record at \(stated)") }
        return .success(Int64(stated))
    }

    /// A range not read yet, as the failure of a lookup that needs it.
    struct Unread: Error {
        var range: Range<Int64>
    }

    static func u64(_ cursor: inout ByteCursor, _ field: String) throws -> UInt64 {
        let low = UInt64(try cursor.u32(field)), high = UInt64(try cursor.u32(field))
        let value = high << 32 | low
        guard value <= UInt64(Limits.maxLength) else { throw cursor.failure("\(field) \(value) out of bounds") }
        return value
    }
}
