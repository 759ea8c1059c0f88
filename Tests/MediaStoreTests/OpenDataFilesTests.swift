// The table of open data files: least recently used closed first, and
// never more than half the process's descriptor limit, as it is now.
import Foundation
import XCTest
@testable import MediaStore
@testable import MediaSupport
@testable import MediaTestSupport
#if canImport(Glibc)
import Glibc
#endif

final class OpenDataFilesTests: XCTestCase {
    private final class Owner {}

    private func openDevNull() -> DataFile {
        DataFile(fd: open("/dev/null", O_RDONLY | O_CLOEXEC))
    }

    func testALowDescriptorLimit_capsTheTableAtHalfOfIt_evenBelowItsCapacity() throws {
        let limit = Locked(1024)
        let table = OpenDataFiles(capacity: 256, descriptorLimit: { limit.withLock { $0 } })
        let owners = (0..<60).map { _ in Owner() }
        for owner in owners[..<30] { _ = try table.file(for: ObjectIdentifier(owner), open: openDevNull) }
        XCTAssertEqual(table.count, 30)
        // Lowered under the running mount (`prlimit`): the next open obeys.
        limit.withLock { $0 = 40 }
        for owner in owners[30...] { _ = try table.file(for: ObjectIdentifier(owner), open: openDevNull) }
        XCTAssertEqual(table.count, 20)
        // The most recently used stayed open.
        XCTAssertNotNil(table.touch(ObjectIdentifier(owners[59])))
        XCTAssertNil(table.touch(ObjectIdentifier(owners[0])))
    }

    func testTheCapacity_boundsTheTableUnderAHighLimit() throws {
        let table = OpenDataFiles(capacity: 10, descriptorLimit: { 1 << 20 })
        let owners = (0..<25).map { _ in Owner() }
        for owner in owners { _ = try table.file(for: ObjectIdentifier(owner), open: openDevNull) }
        XCTAssertEqual(table.count, 10)
    }
}
