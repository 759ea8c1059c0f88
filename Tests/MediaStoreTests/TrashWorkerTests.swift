// The store's trash worker: removals are deleted by one thread, stop() leaves
// trash empty, and removals after stop() delete in the caller.
import XCTest
@testable import MediaStore
@testable import MediaSupport
@testable import MediaTestSupport
#if canImport(Glibc)
import Glibc
#endif

final class TrashWorkerTests: XCTestCase {
    private var base = ""

    override func setUpWithError() throws {
        base = try TemporaryDirectory.make("trash")
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: base)
    }

    private func trashNames() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: base + "/trash")
    }

    func testStop_afterManyRemovals_leavesTrashEmpty() throws {
        let store = try CacheStore(root: base)
        for i in 0..<200 {
            let key = "https://example.com/\(i).bin"
            close(try store.openData(forKey: key, length: 1 << 20))
            store.remove(key: key)
            if i % 3 == 0 { store.discardData(forKey: key) }
        }
        store.stop()
        XCTAssertEqual(try trashNames(), [])
        XCTAssertTrue(store.entries().isEmpty)
    }

    func testRemove_afterStop_deletesBeforeReturning() throws {
        let store = try CacheStore(root: base)
        store.stop()
        let key = "https://example.com/late.bin"
        close(try store.openData(forKey: key, length: 4096))
        store.remove(key: key)
        XCTAssertEqual(try trashNames(), [])
    }

    func testStop_twice_returns() throws {
        let store = try CacheStore(root: base)
        store.remove(key: "https://example.com/absent.bin")
        store.stop()
        store.stop()
    }

    func testDiscardData_ofAFileStillOpen_keepsItReadable() throws {
        let store = try CacheStore(root: base)
        let key = "https://example.com/open.bin"
        let fd = try store.openData(forKey: key, length: 4096)
        defer { close(fd) }
        var byte: UInt8 = 7
        XCTAssertEqual(pwrite(fd, &byte, 1, 100), 1)
        store.discardData(forKey: key)
        store.stop()
        XCTAssertEqual(try trashNames(), [])
        byte = 0
        XCTAssertEqual(pread(fd, &byte, 1, 100), 1)
        XCTAssertEqual(byte, 7)
    }
}
