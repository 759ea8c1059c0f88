// One central directory entry of a ZIP: its name, its sizes (ZIP64 extra
// for the saturated ones), its time, where its local header is, and why
// it cannot be served by range if it cannot. The local header says the
// rest: how long its own extra field is.
import Glibc
import MediaSupport
import Foundation
import MediaStore
import MediaNetwork

struct ZipEntry {
    var name: String
    var path: String
    var size: Int64
    var mtime: Int64?
    var localStart: Int64
    var nameLength: Int
    var centralExtraLength: Int
    var method: UInt16
    var isDirectory: Bool
    var refusal: ArchiveRefusal?

    static func central(_ cursor: inout ByteCursor, number: Int, base: Int64, directoryStart: Int64) throws -> ZipEntry {
        let at = "entry \(number)"
        guard try cursor.u32("\(at) signature") == 0x0201_4B50 else { throw cursor.failure("\(at) has no central header signature") }
        let madeBy = try cursor.u16("\(at) version made by")
        _ = try cursor.u16("\(at) version needed")
        let flags = try cursor.u16("\(at) flags")
        let method = try cursor.u16("\(at) method")
        let dosTime = try cursor.u32("\(at) time")
        _ = try cursor.u32("\(at) CRC")
        var packed = UInt64(try cursor.u32("\(at) compressed size"))
        var size = UInt64(try cursor.u32("\(at) size"))
        let nameLength = Int(try cursor.u16("\(at) name length"))
        let extraLength = Int(try cursor.u16("\(at) extra length"))
        let commentLength = Int(try cursor.u16("\(at) comment length"))
        let disk = try cursor.u16("\(at) disk")
        _ = try cursor.u16("\(at) internal attributes")
        let external = try cursor.u32("\(at) external attributes")
        var offset = UInt64(try cursor.u32("\(at) local header offset"))
        let nameBytes = try cursor.bytes(nameLength, "\(at) name")
        let name = flags & 0x800 != 0 ? String(decoding: nameBytes, as: UTF8.self) : RAR4Name.plain(nameBytes)
        var extra = ByteCursor(try cursor.bytes(extraLength, "\(name) extra field"), origin: "\(cursor.origin), \(name)")
        try cursor.skip(commentLength, "\(name) comment")
        var mtime = DOSTime.seconds(dosTime)
        while extra.remaining >= 4 {
            let tag = try extra.u16("extra tag")
            var field = ByteCursor(try extra.bytes(Int(try extra.u16("extra size")), "extra field 0x\(String(tag, radix: 16))"),
                                   origin: extra.origin)
            switch tag {
            case 0x0001:
                if size == 0xFFFF_FFFF { size = try ZipDirectory.u64(&field, "ZIP64 size") }
                if packed == 0xFFFF_FFFF { packed = try ZipDirectory.u64(&field, "ZIP64 compressed size") }
                if offset == 0xFFFF_FFFF { offset = try ZipDirectory.u64(&field, "ZIP64 local header offset") }
            case 0x5455:
                if field.remaining >= 5, try field.u8("timestamp flags") & 0x01 != 0 { mtime = Int64(Int32(bitPattern: try field.u32("mtime"))) }
            default:
                break
            }
        }
        guard size <= UInt64(Limits.maxLength), packed <= UInt64(Limits.maxLength) else {
            throw extra.failure("sizes \(packed)/\(size) out of bounds, no ZIP64 extra for them")
        }
        guard offset < UInt64(directoryStart - base) else {
            throw extra.failure("local header offset \(offset) lies past the central directory")
        }
        var refusal: ArchiveRefusal?
        if flags & 0x41 != 0 || method == 99 { refusal = .encryptedData }
        if refusal == nil, method != 0 { refusal = .compressed(method: Int(method)) }
        if refusal == nil, madeBy >> 8 == 3, external >> 16 & 0xF000 == 0xA000 { refusal = .link }
        if refusal == nil, disk != 0 && disk != 0xFFFF { refusal = .missingVolume(Int(disk)) }
        if refusal == nil, packed != size { throw extra.failure("stored, yet \(packed) bytes packed for \(size)") }
        let isDirectory = name.hasSuffix("/")
        var path = name
        if !isDirectory {
            do {
                path = try ArchivePath.checked(name, backslashIsSeparator: false)
            } catch let escaping as ArchiveRefusal {
                refusal = refusal ?? escaping
            }
        }
        return ZipEntry(name: name, path: path, size: Int64(size), mtime: mtime, localStart: base + Int64(offset),
                        nameLength: nameLength, centralExtraLength: extraLength, method: method,
                        isDirectory: isDirectory, refusal: refusal)
    }

    /// The local header's extra length, after checking it is this entry's
    /// header; `lead` holds its 30 bytes and name.
    static func localExtraLength(_ lead: ArraySlice<UInt8>, entry: ZipEntry, origin: String) throws -> Int64 {
        var cursor = ByteCursor(lead, origin: "\(origin), local header of \(entry.name)")
        guard try cursor.u32("signature") == 0x0403_4B50 else { throw cursor.failure("no local header signature") }
        _ = try cursor.u16("version needed")
        _ = try cursor.u16("flags")
        guard try cursor.u16("method") == entry.method else { throw cursor.failure("a method the central directory does not give") }
        try cursor.skip(16, "time, CRC and sizes")
        guard Int(try cursor.u16("name length")) == entry.nameLength else { throw cursor.failure("a name the central directory does not give") }
        return Int64(try cursor.u16("extra length"))
    }
}
