// The adapter's conversions, without a mount: errors to errnos, attributes
// to stat, xattr values and lists into the caller's buffer, the open flags
// refused, the page-cache decision in an open's reply, statfs, mountinfo
// lines, and the passthrough fields amended in INIT and OPEN messages.
import CFuse
import XCTest
@testable import MediaCache
@testable import MediaSources
@testable import MediaSegmented
@testable import MediaFS
#if canImport(Glibc)
import Glibc
@testable import MediaSupport
@testable import MediaTestSupport
#endif

final class ConversionTests: XCTestCase {
    private let owner = (uid: uid_t(1000), gid: gid_t(100))

    // MARK: Errors

    func testReply_ofAMediaError_isItsErrnoNegated() {
        XCTAssertEqual(reply("test") { throw MediaError(ENOENT, "no such file") }, -ENOENT)
        XCTAssertEqual(reply("test") { throw MediaError(EROFS, "read-only") }, -EROFS)
    }

    func testReply_ofAnyOtherError_isEIO() {
        struct Unexpected: Error {}
        XCTAssertEqual(reply("test") { throw Unexpected() }, -EIO)
    }

    func testReply_ofABodyThatReturns_isItsValue() {
        XCTAssertEqual(reply("test") { 42 }, 42)
    }

    // MARK: Attributes

    func testFileStat_isARegularFileOfTheOwner_withItsSizeBlocksAndTimes() {
        let stat = fileStat(owner: owner, (size: 1025, mtime: 1_727_776_800))
        XCTAssertEqual(stat.st_mode, S_IFREG | 0o644)
        XCTAssertEqual(stat.st_nlink, 1)
        XCTAssertEqual(stat.st_uid, 1000)
        XCTAssertEqual(stat.st_gid, 100)
        XCTAssertEqual(stat.st_size, 1025)
        XCTAssertEqual(stat.st_blocks, 3, "512-byte blocks, rounded up")
        XCTAssertEqual(stat.st_mtim.tv_sec, 1_727_776_800)
        XCTAssertEqual(stat.st_ctim.tv_sec, 1_727_776_800)
        XCTAssertEqual(stat.st_atim.tv_sec, 1_727_776_800)
    }

    func testFileStat_blocks_ofAWholeNumberOfBlocksAndOfEmpty() {
        XCTAssertEqual(fileStat(owner: owner, (size: 1024, mtime: 0)).st_blocks, 2)
        XCTAssertEqual(fileStat(owner: owner, (size: 0, mtime: 0)).st_blocks, 0)
    }

    func testFileStat_ofTheLargestSize_doesNotOverflowItsBlocks() {
        let stat = fileStat(owner: owner, (size: Int64.max, mtime: 0))
        XCTAssertEqual(stat.st_blocks, blkcnt_t(Int64.max / 512 + 1))
    }

    func testDirectoryStat_isADirectoryOfTheOwner_datedAtTheMount() {
        let stat = directoryStat(owner: owner, mountedAt: 1_700_000_000)
        XCTAssertEqual(stat.st_mode, S_IFDIR | 0o755)
        XCTAssertEqual(stat.st_nlink, 2)
        XCTAssertEqual(stat.st_uid, 1000)
        XCTAssertEqual(stat.st_gid, 100)
        XCTAssertEqual(stat.st_mtim.tv_sec, 1_700_000_000)
        XCTAssertEqual(stat.st_atim.tv_sec, 1_700_000_000)
    }

    // MARK: Extended attributes

    func testCopyOut_withSizeZero_givesTheSizeAndCopiesNothing() throws {
        var buffer = [CChar](repeating: 7, count: 4)
        let n = try buffer.withUnsafeMutableBufferPointer { try copyOut(Array("hello".utf8), to: $0.baseAddress, size: 0) }
        XCTAssertEqual(n, 5)
        XCTAssertEqual(buffer, [7, 7, 7, 7])
    }

    func testCopyOut_intoABufferTooSmall_isERANGE() {
        let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: 4)
        defer { buffer.deallocate() }
        XCTAssertThrowsError(try copyOut(Array("hello".utf8), to: buffer, size: 4)) {
            XCTAssertEqual(($0 as? MediaError)?.errno, ERANGE)
        }
    }

    func testCopyOut_intoABufferLargeEnough_copiesTheValueAndGivesItsSize() throws {
        var buffer = [CChar](repeating: 0, count: 8)
        let n = try buffer.withUnsafeMutableBufferPointer { try copyOut(Array("hello".utf8), to: $0.baseAddress, size: 8) }
        XCTAssertEqual(n, 5)
        XCTAssertEqual(buffer.prefix(5).map { UInt8(bitPattern: $0) }, Array("hello".utf8))
        XCTAssertEqual(buffer[5], 0)
    }

    func testCopyOut_ofAnEmptyValue_copiesNothingAndGivesZero() throws {
        var buffer = [CChar](repeating: 7, count: 4)
        let n = try buffer.withUnsafeMutableBufferPointer { try copyOut([], to: $0.baseAddress, size: 4) }
        XCTAssertEqual(n, 0)
        XCTAssertEqual(buffer, [7, 7, 7, 7])
    }

    func testAttributeList_endsEveryNameWithANul() {
        XCTAssertEqual(attributeList(["user.a", "user.bc"]), Array("user.a\0user.bc\0".utf8))
        XCTAssertEqual(attributeList([]), [])
    }

    func testRequireAdministrator_letsRootAndTheOwner_andRefusesOthersWithEACCES() {
        XCTAssertNoThrow(try requireAdministrator(caller: 0, owner: 1000))
        XCTAssertNoThrow(try requireAdministrator(caller: 1000, owner: 1000))
        XCTAssertThrowsError(try requireAdministrator(caller: 1001, owner: 1000)) {
            XCTAssertEqual(($0 as? MediaError)?.errno, EACCES)
        }
    }

    // MARK: Opens

    func testRefuseWritingOpen_letsReadOnlyOpensThrough() {
        XCTAssertNoThrow(try Catalog.refuseWriting(flags: O_RDONLY))
        XCTAssertNoThrow(try Catalog.refuseWriting(flags: O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW))
    }

    func testRefuseWritingOpen_refusesEveryWritingModeAndTruncation_withEROFS() {
        for flags in [O_WRONLY, O_RDWR, O_WRONLY | O_APPEND, O_RDONLY | O_TRUNC, O_ACCMODE] {
            XCTAssertThrowsError(try Catalog.refuseWriting(flags: flags), "flags \(flags)") {
                XCTAssertEqual(($0 as? MediaError)?.errno, EROFS)
            }
        }
    }

    func testApplyOpened_setsKeepCacheAndDirectIOAsServed() {
        let cases: [(Opened.Served, keep: UInt32, direct: UInt32)] = [
            (.pageCache(keep: true), 1, 0), (.pageCache(keep: false), 0, 0),
            (.aroundPageCache, 0, 1), (.scannerDirect, 0, 1), (.kernelReads, 0, 0),
        ]
        for (served, keep, direct) in cases {
            var info = fuse_file_info()
            info.keep_cache = 1 - keep
            info.direct_io = 1 - direct
            applyOpened(served, to: &info)
            XCTAssertEqual(info.keep_cache, keep, "\(served)")
            XCTAssertEqual(info.direct_io, direct, "\(served)")
        }
    }

    // MARK: statfs

    func testFileSystemStat_countsTheCacheIn4KiBBlocks() {
        let stat = fileSystemStat(capacity: 10 << 20, available: (4 << 20) + 100, files: 12)
        XCTAssertEqual(stat.f_bsize, 4096)
        XCTAssertEqual(stat.f_frsize, 4096)
        XCTAssertEqual(stat.f_blocks, 2560)
        XCTAssertEqual(stat.f_bfree, 1024, "a partial block is not free")
        XCTAssertEqual(stat.f_bavail, 1024)
        XCTAssertEqual(stat.f_files, 12)
        XCTAssertEqual(stat.f_namemax, 255)
    }

    // MARK: mountinfo

    func testMountTableEntry_fromALine_givesTheDeviceAndTheUnescapedMountpoint() {
        let line = "36 35 0:52 / /mnt/my\\040media\\011x rw,nosuid,nodev,relatime shared:1 - fuse.mediafs mediafs rw\n"
        let entry = MountTable.entry(fromLine: line)
        XCTAssertEqual(entry?.device, "0:52")
        XCTAssertEqual(entry?.mountpoint, "/mnt/my media\tx")
    }

    func testMountTableEntry_ofAShortLine_isNil() {
        XCTAssertNil(MountTable.entry(fromLine: "36 35 0:52 /\n"))
    }

    func testMountTableUnescape_keepsABackslashThatStartsNoOctalEscape() {
        XCTAssertEqual(MountTable.unescape("/a\\12x"), "/a\\12x")
        XCTAssertEqual(MountTable.unescape("/a\\134b"), "/a\\b")
        XCTAssertEqual(MountTable.unescape("/a\\9"), "/a\\9")
    }

    // MARK: Passthrough messages (include/uapi/linux/fuse.h, protocol 7.40)

    /// A fuse_init_in body: minor at 4, flags at 12, flags2 at 16.
    private func initRequest(minor: UInt32, flags: UInt32, flags2: UInt32) -> [UInt8] {
        var body = [UInt8](repeating: 0, count: 64)
        body.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: UInt32(7), toByteOffset: 0, as: UInt32.self)
            raw.storeBytes(of: minor, toByteOffset: 4, as: UInt32.self)
            raw.storeBytes(of: flags, toByteOffset: 12, as: UInt32.self)
            raw.storeBytes(of: flags2, toByteOffset: 16, as: UInt32.self)
        }
        return body
    }

    private func offers(_ body: [UInt8]) -> Bool {
        body.withUnsafeBytes { Passthrough.offersPassthrough(initRequest: $0.baseAddress!) }
    }

    func testOffersPassthrough_needsProtocol7_40_theExtendedFlags_andThePassthroughBit() {
        let initExt: UInt32 = 1 << 30, passthrough2: UInt32 = 1 << 5
        XCTAssertTrue(offers(initRequest(minor: 40, flags: initExt, flags2: passthrough2)))
        XCTAssertTrue(offers(initRequest(minor: 41, flags: initExt | 1, flags2: passthrough2 | 1)))
        XCTAssertFalse(offers(initRequest(minor: 39, flags: initExt, flags2: passthrough2)))
        XCTAssertFalse(offers(initRequest(minor: 40, flags: 0, flags2: passthrough2)))
        XCTAssertFalse(offers(initRequest(minor: 40, flags: initExt, flags2: 0)))
    }

    func testAmendInitReply_setsTheExtendedAndPassthroughFlags_andAStackDepthOfOne_keepingTheRest() {
        var body = [UInt8](repeating: 0, count: 64)
        body.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: UInt32(0x11), toByteOffset: 12, as: UInt32.self)
            raw.storeBytes(of: UInt32(0x2), toByteOffset: 32, as: UInt32.self)
            raw.storeBytes(of: UInt32(0xABCD), toByteOffset: 20, as: UInt32.self)
            Passthrough.amend(initReply: raw.baseAddress!)
        }
        body.withUnsafeBytes { raw in
            XCTAssertEqual(raw.load(fromByteOffset: 12, as: UInt32.self), 0x11 | 1 << 30)
            XCTAssertEqual(raw.load(fromByteOffset: 32, as: UInt32.self), 0x2 | 1 << 5)
            XCTAssertEqual(raw.load(fromByteOffset: 36, as: UInt32.self), 1)
            XCTAssertEqual(raw.load(fromByteOffset: 20, as: UInt32.self), 0xABCD, "max_write untouched")
        }
    }

    func testAmendOpenReply_setsFOPEN_PASSTHROUGH_andTheBackingID_keepingTheHandleAndFlags() {
        var body = [UInt8](repeating: 0, count: 16)
        body.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: UInt64(0xDEAD_BEEF), toByteOffset: 0, as: UInt64.self)
            raw.storeBytes(of: UInt32(1 << 1), toByteOffset: 8, as: UInt32.self)
            Passthrough.amend(openReply: raw.baseAddress!, backingID: 17)
        }
        body.withUnsafeBytes { raw in
            XCTAssertEqual(raw.load(fromByteOffset: 0, as: UInt64.self), 0xDEAD_BEEF)
            XCTAssertEqual(raw.load(fromByteOffset: 8, as: UInt32.self), 1 << 1 | 1 << 7)
            XCTAssertEqual(raw.load(fromByteOffset: 12, as: Int32.self), 17)
        }
    }

    // MARK: Handles

    func testAHandle_borrowsTheSameObject_andReleaseLetsItGo() {
        weak var gone: OpenDirectory?
        let handle: UInt64
        do {
            let directory = OpenDirectory()
            directory.entries = []
            gone = directory
            handle = directory.handle
        }
        XCTAssertNotNil(gone, "the kernel's handle keeps the object")
        XCTAssertTrue(OpenDirectory.borrow(handle) === gone)
        OpenDirectory.release(handle)
        XCTAssertNil(gone)
    }
}
