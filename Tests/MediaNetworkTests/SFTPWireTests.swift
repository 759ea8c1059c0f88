import XCTest
@testable import MediaNetwork

/// SFTP v3's packets as the pipelined listing writes and reads them; the
/// listing itself runs against OpenSSH's sftp-server (test_sftp.py), whose
/// answers are the fixtures that count: these pin the bounds.
final class SFTPWireTests: XCTestCase {
    func testARequest_isItsLengthTypeIdAndLengthPrefixedStrings() {
        XCTAssertEqual(SFTPWire.request(SFTPWire.readdir, id: 0x0102_0304, [[0xAA, 0xBB]]),
                       [0, 0, 0, 11, 12, 1, 2, 3, 4, 0, 0, 0, 2, 0xAA, 0xBB])
    }

    func testANamePacket_givesEachNameWithItsSizeModeAndMtime_pastUidsAndExtensions() throws {
        var body: [UInt8] = [SFTPWire.namePacket, 0, 0, 0, 7, 0, 0, 0, 2]
        body += string("a.mkv")
        body += string("-rw-r--r-- long name")
        body += u32(0x8000_000F)  // size, uid and gid, permissions, times, extensions
        body += u64(5_000_000_000)
        body += u32(1000)
        body += u32(1000)
        body += u32(0o100644)
        body += u32(1)
        body += u32(1_700_000_000)
        body += u32(1)
        body += string("ext@x")
        body += string("data")
        body += string("dir")
        body += string("")
        body += u32(0x4)
        body += u32(0o040755)
        let packet = try SFTPWire.packet(body[...])
        XCTAssertEqual(packet.type, SFTPWire.namePacket)
        XCTAssertEqual(packet.id, 7)
        var rest = packet.rest
        let names = try SFTPWire.names(&rest)
        XCTAssertEqual(names.map { String(decoding: $0.name, as: UTF8.self) }, ["a.mkv", "dir"])
        XCTAssertEqual(names[0].attributes, .init(size: 5_000_000_000, permissions: 0o100644, mtime: 1_700_000_000))
        XCTAssertEqual(names[1].attributes, .init(size: nil, permissions: 0o040755, mtime: nil))
        let entry = SFTPSession.entry(name: "a.mkv", SFTPSession.attributes(names[0].attributes))
        XCTAssertEqual(entry, SFTPSession.Entry(name: "a.mkv", isDirectory: false, isRegular: true, isLink: false,
                                                size: 5_000_000_000, mtime: 1_700_000_000))
    }

    func testWhatTheServerCannotHaveSent_isMalformed_neverReadPastThePacket() {
        // A count of names the packet's bytes cannot hold.
        var lying = SFTPWire.Reader(u32(1_000_000)[...] + string("x")[...])
        XCTAssertThrowsError(try SFTPWire.names(&lying))
        // A string longer than what is left (room enough for the count).
        var cut = SFTPWire.Reader((u32(1) + u32(50) + [UInt8](repeating: 0, count: 10))[...])
        XCTAssertThrowsError(try SFTPWire.names(&cut))
        // A name longer than any file's.
        var long = SFTPWire.Reader((u32(1) + string(String(repeating: "n", count: SFTPWire.maxName + 1))
                                    + string("") + u32(0))[...])
        XCTAssertThrowsError(try SFTPWire.names(&long))
        // Attributes cut short, and extensions more than the bytes left.
        var short = SFTPWire.Reader((u32(0x1) + [0, 0, 0])[...])
        XCTAssertThrowsError(try SFTPWire.attributes(&short))
        var extensions = SFTPWire.Reader((u32(0x8000_0000) + u32(UInt32.max))[...])
        XCTAssertThrowsError(try SFTPWire.attributes(&extensions))
        // A packet's length: none before 4 bytes, none past OpenSSH's limit or under a type and id.
        XCTAssertNil(try SFTPWire.packetLength([0, 0, 1][...]))
        XCTAssertEqual(try SFTPWire.packetLength(u32(9)[...]), 9)
        XCTAssertThrowsError(try SFTPWire.packetLength(u32(UInt32(SFTPWire.maxPacket) + 1)[...]))
        XCTAssertThrowsError(try SFTPWire.packetLength(u32(4)[...]))
    }

    func testAStatus_givesItsCodeAndMessage() throws {
        var reader = SFTPWire.Reader((u32(SFTPWire.eof) + string("End of file") + string(""))[...])
        let status = try SFTPWire.status(&reader)
        XCTAssertEqual(status.code, SFTPWire.eof)
        XCTAssertEqual(status.message, "End of file")
    }

    private func u32(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }

    private func u64(_ value: UInt64) -> [UInt8] { u32(UInt32(value >> 32)) + u32(UInt32(value & 0xFFFF_FFFF)) }

    private func string(_ text: String) -> [UInt8] { u32(UInt32(text.utf8.count)) + Array(text.utf8) }
}
