// FileIO: reads that stop only at the end of the file, writes at any
// offset (a hole before them), punched ranges that read as zeros with the
// length kept, and failures that carry the errno and name the call.
// EINTR cannot be forced from here; its loop is the same for every call.
import XCTest
@testable import MediaStore
@testable import MediaSupport
@testable import MediaTestSupport
#if canImport(Glibc)
import Glibc
#endif

final class FileIOTests: XCTestCase {
    private var base = ""
    private var fd: Int32 = -1

    override func setUpWithError() throws {
        base = try TemporaryDirectory.make("fileio")
        fd = open(base + "/file", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        XCTAssertGreaterThanOrEqual(fd, 0)
    }

    override func tearDownWithError() throws {
        if fd >= 0 { close(fd) }
        try? FileManager.default.removeItem(atPath: base)
    }

    private func read(_ count: Int, at offset: Int64) throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0xEE, count: count)
        let n = try buffer.withUnsafeMutableBytes { try FileIO.readFully(fd: fd, into: $0, at: offset) }
        return Array(buffer[..<n])
    }

    func testReadFully_ofWrittenBytes_returnsThemAll() throws {
        let bytes = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 * 7) }
        try FileIO.writeFully(fd: fd, from: bytes, at: 0)
        XCTAssertEqual(try read(bytes.count, at: 0), bytes)
        XCTAssertEqual(try read(10, at: 500), Array(bytes[500..<510]))
    }

    func testReadFully_pastTheEnd_isShortAtTheEndAndEmptyBeyondIt() throws {
        try FileIO.writeFully(fd: fd, from: [1, 2, 3, 4, 5], at: 0)
        XCTAssertEqual(try read(100, at: 2), [3, 4, 5])
        XCTAssertEqual(try read(100, at: 5), [])
        XCTAssertEqual(try read(100, at: 1_000), [])
    }

    func testWriteFully_atAnOffset_leavesAHoleOfZerosBeforeIt() throws {
        try FileIO.writeFully(fd: fd, from: [9, 9], at: 4_096)
        XCTAssertEqual(try read(4_098, at: 0), [UInt8](repeating: 0, count: 4_096) + [9, 9])
    }

    func testPunchHole_readsAsZeros_andKeepsTheLength() throws {
        let bytes = [UInt8](repeating: 0xAB, count: 3 * 4_096)
        try FileIO.writeFully(fd: fd, from: bytes, at: 0)
        try FileIO.punchHole(fd: fd, range: 4_096..<8_192)
        let after = try read(bytes.count + 10, at: 0)
        XCTAssertEqual(after.count, bytes.count)
        XCTAssertEqual(Array(after[..<4_096]), Array(bytes[..<4_096]))
        XCTAssertEqual(Array(after[4_096..<8_192]), [UInt8](repeating: 0, count: 4_096))
        XCTAssertEqual(Array(after[8_192...]), Array(bytes[8_192...]))
    }

    func testTruncate_thenSync_setsTheLength() throws {
        try FileIO.writeFully(fd: fd, from: [1, 2, 3, 4], at: 0)
        try FileIO.truncate(fd: fd, to: 2)
        try FileIO.sync(fd: fd)
        try FileIO.syncData(fd: fd)
        XCTAssertEqual(try read(10, at: 0), [1, 2])
        try FileIO.truncate(fd: fd, to: 6)
        XCTAssertEqual(try read(10, at: 0), [1, 2, 0, 0, 0, 0])
    }

    func testCalls_onAClosedDescriptor_throwEBADFNamingTheCall() throws {
        close(fd)
        let closed = fd
        fd = -1
        var buffer = [UInt8](repeating: 0, count: 4)
        XCTAssertThrowsError(try buffer.withUnsafeMutableBytes { try FileIO.readFully(fd: closed, into: $0, at: 8) }) {
            XCTAssertEqual(($0 as? MediaError)?.errno, EBADF)
            XCTAssertTrue("\($0)".contains("pread at byte 8"), "\($0)")
        }
        XCTAssertThrowsError(try FileIO.writeFully(fd: closed, from: [1], at: 0)) {
            XCTAssertEqual(($0 as? MediaError)?.errno, EBADF)
            XCTAssertTrue("\($0)".contains("pwrite"), "\($0)")
        }
        XCTAssertThrowsError(try FileIO.punchHole(fd: closed, range: 0..<1)) {
            XCTAssertEqual(($0 as? MediaError)?.errno, EBADF)
        }
        XCTAssertThrowsError(try FileIO.sync(fd: closed)) { XCTAssertEqual(($0 as? MediaError)?.errno, EBADF) }
    }
}
