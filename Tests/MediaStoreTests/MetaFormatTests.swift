import XCTest
@testable import MediaStore
@testable import MediaSupport
@testable import MediaTestSupport

final class MetaFormatTests: XCTestCase {
    private let full = EntryMeta(
        url: "https://example.com/a.mp4",
        info: ContentInfo(length: 12345, contentType: "video/mp4", etag: "\"abc\"",
                          lastModified: "Mon, 01 Jan 2024 00:00:00 GMT", acceptsRanges: true),
        present: ByteRangeSet([0..<1024, 4096..<8192]),
        lastAccess: 1_700_000_000, lastValidated: 1_700_000_100)

    private let bare = EntryMeta(
        url: "http://h/x", info: ContentInfo(length: 10, acceptsRanges: false),
        present: ByteRangeSet([0..<10]), lastAccess: 0, lastValidated: -5)

    // The checksum was computed independently (Python) so the pin also checks FNV-1a.
    private let pinned = """
        mediafs-meta 1
        url https://example.com/a.mp4
        length 12345
        type video/mp4
        etag "abc"
        last-modified Mon, 01 Jan 2024 00:00:00 GMT
        accept-ranges 1
        present 0-1023,4096-8191
        complete 0
        accessed 1700000000
        validated 1700000100
        checksum 61f38359cffbcee8

        """

    func testEncode_ofFixedEntry_matchesPinnedBytes() {
        XCTAssertEqual(String(decoding: MetaFormat.encode(full), as: UTF8.self), pinned)
    }

    func testDecode_ofPinnedBytes_givesFixedEntry() throws {
        XCTAssertEqual(try MetaFormat.decode(Array(pinned.utf8)), full)
    }

    private var pinnedEntry: EntryMeta {
        var m = full
        m.present = ByteRangeSet([0..<12345])
        m.pinned = true
        return m
    }

    // A pinned entry's bytes, checksum computed independently (Python): the
    // `pinned` line is part of format 1, so changing it must be deliberate.
    private let pinnedEntryBytes = """
        mediafs-meta 1
        url https://example.com/a.mp4
        length 12345
        type video/mp4
        etag "abc"
        last-modified Mon, 01 Jan 2024 00:00:00 GMT
        accept-ranges 1
        present 0-12344
        complete 1
        pinned 1
        accessed 1700000000
        validated 1700000100
        checksum bd80c019536df2e7

        """

    func testEncode_ofAPinnedEntry_matchesItsPinnedBytes() {
        XCTAssertEqual(String(decoding: MetaFormat.encode(pinnedEntry), as: UTF8.self), pinnedEntryBytes)
    }

    func testDecode_ofAPinnedEntrysBytes_givesItPinned() throws {
        XCTAssertEqual(try MetaFormat.decode(Array(pinnedEntryBytes.utf8)), pinnedEntry)
    }

    func testDecode_ofMetadataWithoutAPinnedLine_isUnpinned() throws {
        XCTAssertFalse(try MetaFormat.decode(Array(pinned.utf8)).pinned)
        XCTAssertFalse(pinned.contains("pinned"), "an unpinned entry is encoded as before pinning existed")
    }

    func testDecode_ofAPinnedLineOtherThan0Or1_throws() {
        let damaged = Self.resealed(pinnedEntryBytes.replacingOccurrences(of: "pinned 1", with: "pinned yes"))
        XCTAssertThrowsError(try MetaFormat.decode(damaged)) { error in
            XCTAssertTrue("\(error)".contains("pinned"), "\(error)")
        }
        let unpinned = Self.resealed(pinnedEntryBytes.replacingOccurrences(of: "pinned 1", with: "pinned 0"))
        XCTAssertEqual(try MetaFormat.decode(unpinned).pinned, false)
    }

    func testAScanOnlyEntry_roundTrips_andMetadataWithoutTheLineIsAPlayers() throws {
        var m = pinnedEntry
        m.pinned = false
        m.scanOnly = true
        let text = String(decoding: MetaFormat.encode(m), as: UTF8.self)
        XCTAssertTrue(text.contains("\nscan-only 1\n"), text)
        XCTAssertEqual(try MetaFormat.decode(MetaFormat.encode(m)), m)
        XCTAssertFalse(try MetaFormat.decode(Array(pinnedEntryBytes.utf8)).scanOnly)
        XCTAssertFalse(pinnedEntryBytes.contains("scan-only"), "a player's entry is encoded as before")
        let damaged = Self.resealed(text.replacingOccurrences(of: "scan-only 1", with: "scan-only 2"))
        XCTAssertThrowsError(try MetaFormat.decode(damaged)) { error in
            XCTAssertTrue("\(error)".contains("scan-only"), "\(error)")
        }
    }

    func testRoundTrip_withAllOptionalFields_preservesEntry() throws {
        XCTAssertEqual(try MetaFormat.decode(MetaFormat.encode(full)), full)
    }

    func testRoundTrip_withoutOptionalFields_preservesEntryAndOmitsThem() throws {
        let bytes = MetaFormat.encode(bare)
        let text = String(decoding: bytes, as: UTF8.self)
        XCTAssertFalse(text.contains("\ntype "))
        XCTAssertFalse(text.contains("\netag "))
        XCTAssertFalse(text.contains("\nlast-modified "))
        XCTAssertTrue(text.contains("\ncomplete 1\n"))
        XCTAssertEqual(try MetaFormat.decode(bytes), bare)
    }

    func testRoundTrip_withEmptyPresentSetAndZeroLength_preservesEntry() throws {
        let empty = EntryMeta(url: "u", info: ContentInfo(length: 0), present: ByteRangeSet(), lastAccess: 1, lastValidated: 2)
        XCTAssertEqual(try MetaFormat.decode(MetaFormat.encode(empty)), empty)
    }

    func testEncode_withNewlinesInHeaderValues_stripsThem() throws {
        var m = full
        m.info.etag = "\"a\r\nb\""
        m.info.contentType = "video/mp4\nurl https://evil"
        let decoded = try MetaFormat.decode(MetaFormat.encode(m))
        XCTAssertEqual(decoded.info.etag, "\"ab\"")
        XCTAssertEqual(decoded.info.contentType, "video/mp4url https://evil")
        XCTAssertEqual(decoded.url, m.url)
    }

    func testDecode_ofEveryTruncatedPrefix_throws() {
        let bytes = MetaFormat.encode(full)
        for n in 0..<bytes.count {
            XCTAssertThrowsError(try MetaFormat.decode(Array(bytes[..<n])), "prefix of \(n) bytes")
        }
    }

    func testDecode_withAnyFlippedByte_throws() {
        let bytes = MetaFormat.encode(full)
        for i in bytes.indices {
            var damaged = bytes
            damaged[i] ^= 0x01
            XCTAssertThrowsError(try MetaFormat.decode(damaged), "byte \(i) flipped")
        }
    }

    func testDecode_ofChecksumMismatch_saysSo() {
        var bytes = MetaFormat.encode(full)
        bytes[20] ^= 0x20
        XCTAssertThrowsError(try MetaFormat.decode(bytes)) { error in
            XCTAssertTrue("\(error)".contains("checksum mismatch"), "\(error)")
        }
    }

    func testDecode_ofVersion2_throwsUnknownVersion() {
        var bytes = MetaFormat.encode(full)
        bytes[13] = UInt8(ascii: "2")
        XCTAssertThrowsError(try MetaFormat.decode(bytes)) { error in
            XCTAssertTrue("\(error)".contains("unknown metadata version 2"), "\(error)")
        }
    }

    func testDecode_ofOtherMagic_throwsBadMagic() {
        XCTAssertThrowsError(try MetaFormat.decode(Array("something else\n".utf8))) { error in
            XCTAssertTrue("\(error)".contains("bad magic"), "\(error)")
        }
    }

    func testDecode_withCompleteFlagDisagreeing_throws() {
        let lying = Self.resealed(pinned.replacingOccurrences(of: "complete 0", with: "complete 1"))
        XCTAssertThrowsError(try MetaFormat.decode(lying)) { error in
            XCTAssertTrue("\(error)".contains("complete"), "\(error)")
        }
    }

    func testDecode_withPresentBeyondLength_throws() {
        let lying = Self.resealed(pinned.replacingOccurrences(of: "length 12345", with: "length 5000"))
        XCTAssertThrowsError(try MetaFormat.decode(lying)) { error in
            XCTAssertTrue("\(error)".contains("present"), "\(error)")
        }
    }

    func testDecode_withMissingOrDuplicateOrUnknownField_throws() {
        for edit in [("accessed 1700000000\n", ""), ("accessed 1700000000\n", "accessed 1\naccessed 2\n"),
                     ("accessed 1700000000\n", "accessed 1700000000\ncolour blue\n"), ("length 12345", "length +12345")] {
            let damaged = Self.resealed(pinned.replacingOccurrences(of: edit.0, with: edit.1))
            XCTAssertThrowsError(try MetaFormat.decode(damaged), "after replacing \(edit.0) with \(edit.1)")
        }
    }

    /// Replaces the checksum line so a semantic error is reached, not a checksum one.
    private static func resealed(_ text: String) -> [UInt8] {
        var lines = text.split(separator: "\n").map(String.init)
        lines.removeLast()
        var body = Array((lines.joined(separator: "\n") + "\n").utf8)
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in body { hash = (hash ^ UInt64(b)) &* 0x100_0000_01b3 }
        let hex = String(hash, radix: 16)
        body += Array("checksum \(String(repeating: "0", count: 16 - hex.count) + hex)\n".utf8)
        return body
    }
}
