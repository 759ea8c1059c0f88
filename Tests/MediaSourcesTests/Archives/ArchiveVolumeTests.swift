// ArchiveVolume: reads that overlap or touch become one, so a header
// across two reads is whole; a read past the length is refused.
import XCTest
@testable import MediaSources
@testable import MediaStore
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport

final class ArchiveVolumeTests: XCTestCase {
    func testReadsThatTouchOrOverlap_serveARangeAcrossThem() throws {
        var volume = try ArchiveVolume(name: "v", length: 100, head: Array(0..<10))
        try volume.add(Array(20..<30), at: 20)
        XCTAssertNil(volume.bytes(5..<25))
        try volume.add(Array(8..<22), at: 8)
        XCTAssertEqual(volume.bytes(5..<25).map(Array.init), Array(5..<25))
        XCTAssertEqual(volume.available(from: 3), 27)
        XCTAssertEqual(volume.readAtEnd, 0)
        try volume.add(Array(90..<100), at: 90)
        XCTAssertEqual(volume.readAtEnd, 10)
    }

    func testAReadPastTheLength_isRefused() throws {
        var volume = try ArchiveVolume(name: "v", length: 10, head: [])
        XCTAssertThrowsError(try volume.add([1, 2, 3], at: 8))
        XCTAssertThrowsError(try ArchiveVolume(name: "v", length: -1, head: []))
    }
}
