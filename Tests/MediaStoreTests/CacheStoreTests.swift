import XCTest
@testable import MediaStore
@testable import MediaSupport
@testable import MediaTestSupport
#if canImport(Glibc)
import Glibc
#endif

final class CacheStoreTests: XCTestCase {
    private var base = ""
    private let key = "https://example.com/a.mp4"

    override func setUpWithError() throws {
        base = try TemporaryDirectory.make("store")
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: base)
    }

    private func meta(present: [Range<Int64>], length: Int64 = 100) -> EntryMeta {
        EntryMeta(url: key, info: ContentInfo(length: length, contentType: "video/mp4", etag: "\"e\""),
                  present: ByteRangeSet(present), lastAccess: 1_700_000_000, lastValidated: 1_700_000_000)
    }

    func testReadMeta_tellsDamagedMetadata_aMiss_fromMetadataThatCannotBeReadNow() throws {
        // A decoding failure is an EIO too: taken for "cannot read now", a
        // damaged entry was neither logged nor replaced.
        let store = try CacheStore(root: base)
        let key = "https://a.example/v.mp4"
        try store.saveMeta(EntryMeta(url: key, info: ContentInfo(length: 10), present: ByteRangeSet(),
                                     lastAccess: 1, lastValidated: 1), forKey: key)
        guard case .found = store.readMeta(forKey: key) else { return XCTFail("saved metadata not found") }
        XCTAssertTrue(FileManager.default.createFile(atPath: store.directory(forKey: key) + "/meta",
                                                     contents: Data("mediafs-meta 1\nurl".utf8)))
        guard case .missing = store.readMeta(forKey: key) else { return XCTFail("damaged metadata not a miss") }
        XCTAssertTrue(FileManager.default.createFile(atPath: store.directory(forKey: key) + "/meta",
                                                     contents: Data([0xff, 0x00, 0x13])))
        guard case .missing = store.readMeta(forKey: key) else { return XCTFail("garbage not a miss") }
    }

    func testReadMeta_ofAFileThatCannotBeOpenedForAMoment_isUnreadable_notAMiss() throws {
        // EAGAIN (a lease, a busy network file system) read as damage: a
        // loader then took the entry for new and wrote over bytes its
        // metadata claimed.
        let store = try CacheStore(root: base)
        close(try store.openData(forKey: key, length: 100))
        let saved = meta(present: [0..<10])
        try store.saveMeta(saved, forKey: key)
        let read = try FileLease.holding(store.directory(forKey: key) + "/meta") { store.readMeta(forKey: key) }
        guard case .unreadable(let error) = read else { return XCTFail("leased metadata read as \(read)") }
        XCTAssertEqual(error.errno, EAGAIN)
        XCTAssertEqual(store.loadMeta(forKey: key), saved)
    }

    func testInit_createsVersionedAndTrashDirectories() throws {
        let store = try CacheStore(root: base + "/deep/cache")
        XCTAssertEqual(store.root, base + "/deep/cache")
        for dir in ["/deep/cache/v1", "/deep/cache/trash"] {
            var isDir: ObjCBool = false
            XCTAssertTrue(FileManager.default.fileExists(atPath: base + dir, isDirectory: &isDir) && isDir.boolValue, dir)
        }
        var st = stat()
        XCTAssertEqual(stat(base + "/deep/cache", &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o700)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: base + "/deep/cache/v1"), [])
    }

    func testInit_underARegularFile_throwsNamingThePath() throws {
        XCTAssertTrue(FileManager.default.createFile(atPath: base + "/file", contents: Data()))
        XCTAssertThrowsError(try CacheStore(root: base + "/file/cache")) { error in
            XCTAssertTrue("\(error)".contains(base + "/file/cache"), "\(error)")
            XCTAssertEqual((error as? MediaError)?.errno, ENOTDIR)
        }
    }

    func testDirectory_forKey_usesHashPrefixLayout() throws {
        let store = try CacheStore(root: base)
        let hash = SHA256.hex(key)
        XCTAssertEqual(store.directory(forKey: key), "\(base)/v1/\(hash.prefix(2))/\(hash)")
    }

    func testDirectory_forKey_isTheNameEarlierVersionsGaveIt() throws {
        // Pinned: a changed name would leave every existing cache unreachable.
        let store = try CacheStore(root: base)
        XCTAssertEqual(store.directory(forKey: "https://media.example/films/a.mkv"),
                       "\(base)/v1/5d/5ddb165f64ccab95875986c5a7d59fa71cadb69bbfab4416d64c1b44db2d5627")
    }

    func testLoadMeta_withNothingSaved_returnsNil() throws {
        XCTAssertNil(try CacheStore(root: base).loadMeta(forKey: key))
    }

    func testSaveThenLoad_ofMetaWithinDataSize_roundTrips() throws {
        let store = try CacheStore(root: base)
        close(try store.openData(forKey: key, length: 100))
        let m = meta(present: [0..<10, 50..<100])
        try store.saveMeta(m, forKey: key)
        XCTAssertEqual(store.loadMeta(forKey: key), m)
    }

    func testSaveMeta_twice_replacesAndLeavesNoTempFiles() throws {
        let store = try CacheStore(root: base)
        close(try store.openData(forKey: key, length: 100))
        try store.saveMeta(meta(present: [0..<10]), forKey: key)
        let second = meta(present: [0..<20, 30..<40])
        try store.saveMeta(second, forKey: key)
        XCTAssertEqual(store.loadMeta(forKey: key), second)
        let names = try FileManager.default.contentsOfDirectory(atPath: store.directory(forKey: key)).sorted()
        XCTAssertEqual(names, ["data", "meta"])
    }

    func testLoadMeta_ofCorruptFile_returnsNil() throws {
        let store = try CacheStore(root: base)
        close(try store.openData(forKey: key, length: 100))
        try store.saveMeta(meta(present: [0..<10]), forKey: key)
        let path = store.directory(forKey: key) + "/meta"
        var bytes = try XCTUnwrap(FileManager.default.contents(atPath: path))
        bytes[bytes.count / 2] ^= 0x04
        try bytes.write(to: URL(fileURLWithPath: path))
        XCTAssertNil(store.loadMeta(forKey: key))
    }

    func testLoadMeta_ofTruncatedFile_returnsNil() throws {
        let store = try CacheStore(root: base)
        close(try store.openData(forKey: key, length: 100))
        try store.saveMeta(meta(present: [0..<10]), forKey: key)
        XCTAssertEqual(truncate(store.directory(forKey: key) + "/meta", 40), 0)
        XCTAssertNil(store.loadMeta(forKey: key))
    }

    func testLoadMeta_forDifferentKeyInSameDirectory_returnsNil() throws {
        let store = try CacheStore(root: base)
        var other = meta(present: [])
        other.url = "https://example.com/other.mp4"
        try store.saveMeta(other, forKey: key)
        XCTAssertNil(store.loadMeta(forKey: key))
    }

    func testLoadMeta_claimingBytesBeyondDataSize_returnsNil() throws {
        let store = try CacheStore(root: base)
        close(try store.openData(forKey: key, length: 50))
        try store.saveMeta(meta(present: [0..<10, 60..<70]), forKey: key)
        XCTAssertNil(store.loadMeta(forKey: key))
    }

    func testLoadMeta_claimingBytesWithNoDataFile_returnsNil() throws {
        let store = try CacheStore(root: base)
        try store.saveMeta(meta(present: [0..<10]), forKey: key)
        XCTAssertNil(store.loadMeta(forKey: key))
    }

    func testOpenData_setsSizeToLengthAndKeepsContent() throws {
        let store = try CacheStore(root: base)
        let path = store.directory(forKey: key) + "/data"
        var fd = try store.openData(forKey: key, length: 1 << 30)
        var byte: UInt8 = 42
        XCTAssertEqual(pwrite(fd, &byte, 1, 7), 1)
        close(fd)
        var st = stat()
        XCTAssertEqual(stat(path, &st), 0)
        XCTAssertEqual(st.st_size, 1 << 30)
        XCTAssertLessThan(Int64(st.st_blocks) * 512, 1 << 20, "data file should be sparse")

        fd = try store.openData(forKey: key, length: 4096)
        defer { close(fd) }
        XCTAssertEqual(fstat(fd, &st), 0)
        XCTAssertEqual(st.st_size, 4096)
        byte = 0
        XCTAssertEqual(pread(fd, &byte, 1, 7), 1)
        XCTAssertEqual(byte, 42)
    }

    func testRemove_makesTheEntryGoneAtOnceAndEmptiesTrashInTheBackground() throws {
        let store = try CacheStore(root: base)
        close(try store.openData(forKey: key, length: 100))
        try store.saveMeta(meta(present: [0..<10]), forKey: key)
        store.remove(key: key)
        XCTAssertFalse(FileManager.default.fileExists(atPath: store.directory(forKey: key)))
        XCTAssertNil(store.loadMeta(forKey: key))
        // The trash worker's passes queued so far, run to their end.
        store.stop()
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: base + "/trash"), [])
    }

    func testRemove_ofAbsentKey_doesNothing() throws {
        let store = try CacheStore(root: base)
        store.remove(key: key)
        XCTAssertNil(store.loadMeta(forKey: key))
    }
}
