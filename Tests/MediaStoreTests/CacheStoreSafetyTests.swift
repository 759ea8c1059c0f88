// CacheStore refuses what another user could control: a cache directory
// owned by someone else or writable by others, and symlinks planted as an
// entry's `data` or `meta` (a miss, never followed).
import XCTest
@testable import MediaStore
@testable import MediaSupport
@testable import MediaTestSupport
#if canImport(Glibc)
import Glibc
#endif

final class CacheStoreSafetyTests: XCTestCase {
    private var base = ""
    private let key = "https://example.com/a.mp4"

    override func setUpWithError() throws {
        base = try TemporaryDirectory.make("store-safety")
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: base)
    }

    private func completeEntry(_ store: CacheStore, length: Int64 = 100) throws {
        close(try store.openData(forKey: key, length: length))
        try store.saveMeta(EntryMeta(url: key, info: ContentInfo(length: length, contentType: nil, etag: "\"e\""),
                                     present: ByteRangeSet([0..<length]), lastAccess: 1_700_000_000,
                                     lastValidated: 1_700_000_000), forKey: key)
        XCTAssertNotNil(store.loadMeta(forKey: key))
    }

    func testInit_ofADirectoryWritableByOthers_throwsNamingTheMode() throws {
        XCTAssertEqual(chmod(base, 0o777), 0)
        XCTAssertThrowsError(try CacheStore(root: base)) { error in
            XCTAssertEqual((error as? MediaError)?.errno, EACCES)
            XCTAssertTrue("\(error)".contains(base) && "\(error)".contains("777"), "\(error)")
        }
    }

    func testInit_ofADirectoryOfAnotherUser_throwsNamingTheOwner() throws {
        XCTAssertEqual(chown(base, 65534, 65534), 0, "the unit tests run as root")
        XCTAssertThrowsError(try CacheStore(root: base)) { error in
            XCTAssertEqual((error as? MediaError)?.errno, EACCES)
            XCTAssertTrue("\(error)".contains("uid 65534"), "\(error)")
        }
    }

    func testInit_withTrashASymlink_throws() throws {
        XCTAssertEqual(mkdir(base + "/elsewhere", 0o700), 0)
        XCTAssertEqual(symlink(base + "/elsewhere", base + "/trash"), 0)
        XCTAssertThrowsError(try CacheStore(root: base)) { error in
            XCTAssertTrue("\(error)".contains(base + "/trash"), "\(error)")
        }
    }

    func testLoadMeta_withDataASymlink_returnsNilAndOpenDataReplacesTheLink() throws {
        let store = try CacheStore(root: base)
        try completeEntry(store)
        let data = store.directory(forKey: key) + "/data"
        let decoy = base + "/decoy"
        XCTAssertTrue(FileManager.default.createFile(atPath: decoy, contents: Data(repeating: 9, count: 100)))
        XCTAssertEqual(unlink(data), 0)
        XCTAssertEqual(symlink(decoy, data), 0)
        XCTAssertNil(store.loadMeta(forKey: key))
        close(try store.openData(forKey: key, length: 200))
        var st = stat()
        XCTAssertEqual(lstat(data, &st), 0)
        XCTAssertEqual(st.st_mode & S_IFMT, S_IFREG)
        XCTAssertEqual(st.st_size, 200)
        XCTAssertEqual(FileManager.default.contents(atPath: decoy), Data(repeating: 9, count: 100))
    }

    func testLoadMeta_withMetaASymlinkToGoodMetadata_returnsNil() throws {
        let store = try CacheStore(root: base)
        try completeEntry(store)
        let path = store.directory(forKey: key) + "/meta"
        XCTAssertEqual(rename(path, base + "/decoy-meta"), 0)
        XCTAssertEqual(symlink(base + "/decoy-meta", path), 0)
        XCTAssertNil(store.loadMeta(forKey: key))
    }

    func testLoadMeta_withMetaAFifo_returnsNilWithoutWaiting() throws {
        let store = try CacheStore(root: base)
        try completeEntry(store)
        let path = store.directory(forKey: key) + "/meta"
        XCTAssertEqual(unlink(path), 0)
        XCTAssertEqual(mkfifo(path, 0o600), 0)
        XCTAssertNil(store.loadMeta(forKey: key))
    }
}
