// The evictor over an entry made through the store alone, no loader: what
// its passes do when the entry's metadata cannot be read for a moment (a
// lease, a descriptor limit), and that a later pass reads it and treats it
// as any other.
import Foundation
import XCTest
@testable import MediaCache
@testable import MediaSources
@testable import MediaSegmented
@testable import MediaStore
@testable import MediaNetwork
@testable import MediaSupport
#if canImport(Glibc)
import Glibc
@testable import MediaTestSupport
#endif

final class CacheEvictorTests: XCTestCase {
    private var base = ""
    private var store: CacheStore!
    private let url = "https://media.example/kept.mp4"
    private static let size = 64 << 10
    /// Past every age limit: a pass then evicts what it can.
    private let farFuture = Int64(time(nil)) + 365 * 86_400

    override func setUpWithError() throws {
        base = try TemporaryDirectory.make("evictor")
        store = try CacheStore(root: base)
    }

    override func tearDownWithError() throws {
        store.stop()
        try? FileManager.default.removeItem(atPath: base)
    }

    /// Writes the entry's bytes and metadata claiming them all, read now;
    /// returns the bytes.
    private func makeEntry() throws -> [UInt8] {
        let bytes = (0..<Self.size).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let fd = try store.openData(forKey: url, length: Int64(Self.size))
        let written = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        close(fd)
        XCTAssertEqual(written, Self.size)
        let now = Int64(time(nil))
        try store.saveMeta(EntryMeta(url: url, info: ContentInfo(length: Int64(Self.size)),
                                     present: ByteRangeSet([0..<Int64(Self.size)]), lastAccess: now,
                                     lastValidated: now), forKey: url)
        return bytes
    }

    /// Room for the entry, which goes only once past its age.
    private func evictor() -> CacheEvictor {
        var limits = CacheLimits()
        limits.maxSize = 4 * Int64(Self.size)
        limits.minFree = 0
        return CacheEvictor(store: store, limits: limits)
    }

    private func cachedBytes() -> [UInt8]? {
        FileManager.default.contents(atPath: store.directory(forKey: url) + "/data").map { [UInt8]($0) }
    }

    func testADiskWithLessFreeThanTheMinimum_passesBytesThrough_untilTheMinimumLeavesRoom() throws {
        _ = try makeEntry()
        guard let free = store.freeBytes() else { return XCTFail("statvfs of the cache failed") }
        var limits = CacheLimits()
        limits.maxSize = 1 << 40
        // Every byte evicted would still leave less than the useful room.
        limits.minFree = free + (1 << 30)
        let budget = CacheBudget {}
        let report = CacheEvictor(store: store, limits: limits).run(budget: budget, now: Int64(time(nil)))
        XCTAssertTrue(report.noDiskRoom)
        XCTAssertTrue(report.passesThrough)
        XCTAssertTrue(budget.passesThrough)
        XCTAssertEqual(budget.reserve(upTo: 1), 0)
        XCTAssertNil(cachedBytes(), "the limit holds: what was cached is evicted")

        limits.minFree = 0
        let again = CacheEvictor(store: store, limits: limits).run(budget: budget, now: Int64(time(nil)))
        XCTAssertFalse(again.noDiskRoom)
        XCTAssertFalse(budget.passesThrough)
        XCTAssertEqual(budget.reserve(upTo: 1), 1)
    }

    /// Runs `body` while every open fails with EMFILE.
    private func underADescriptorLimitOf3<T>(_ body: () -> T) -> T {
        var limit = rlimit()
        XCTAssertEqual(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit), 0)
        var low = limit
        low.rlim_cur = 3
        XCTAssertEqual(setrlimit(Int32(RLIMIT_NOFILE.rawValue), &low), 0)
        defer { XCTAssertEqual(setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit), 0) }
        return body()
    }

    func testTheScan_keepsAnEntryWhoseMetadataCannotBeOpenedNow_countsIt_andALaterPassReadsIt() throws {
        // Taken for damage, an entry whose metadata could not be opened
        // for a moment (EAGAIN here; EMFILE, ENOMEM, EIO alike) went to
        // the trash with all its bytes.
        let bytes = try makeEntry()
        let evictor = evictor()
        let remover = Remover()
        let first = try FileLease.holding(store.directory(forKey: url) + "/meta") {
            evictor.run(now: Int64(time(nil)), removing: remover.remove)
        }
        XCTAssertEqual(first.evictedEntries, 0, "an entry whose metadata could not be read now was removed")
        XCTAssertTrue(cachedBytes() == bytes, "its bytes did not survive the pass")
        XCTAssertGreaterThanOrEqual(first.usedBytes, Int64(Self.size), "its bytes, on disk, were not counted")
        let later = evictor.run(now: Int64(time(nil)), removing: remover.remove)
        XCTAssertEqual(later.evictedEntries, 0)
        XCTAssertGreaterThanOrEqual(later.usedBytes, Int64(Self.size), "a later pass does not see the entry")
        // Indexed by the URL its metadata names, it goes past its age as any other.
        let aged = evictor.run(now: farFuture, removing: remover.remove)
        XCTAssertEqual(aged.evictedEntries, 1)
        XCTAssertEqual(remover.asked, [url])
        XCTAssertNil(store.loadMeta(forKey: url))
    }

    func testAFileThatLeftTheMount_whileItsMetadataCannotBeRead_isCounted_andReadAgainAtALaterPass() throws {
        // Read back as none, its entry left the index: its bytes were
        // neither counted nor ever evicted while the mount lived.
        let bytes = try makeEntry()
        let evictor = evictor()
        let remover = Remover()
        // The first pass leaves a mounted file's entry to its loader or record.
        XCTAssertEqual(evictor.run(membership: CacheEvictor.Membership(all: { [self.url] }), now: Int64(time(nil))).usedBytes, 0)
        let left = underADescriptorLimitOf3 {
            evictor.run(membership: CacheEvictor.Membership(changed: [(url: url, mounted: false)]),
                        now: Int64(time(nil)), removing: remover.remove)
        }
        XCTAssertEqual(left.evictedEntries, 0)
        XCTAssertTrue(cachedBytes() == bytes, "its bytes did not survive the pass")
        XCTAssertGreaterThanOrEqual(left.usedBytes, Int64(Self.size), "its bytes, on disk, were not counted")
        let later = evictor.run(now: Int64(time(nil)), removing: remover.remove)
        XCTAssertGreaterThanOrEqual(later.usedBytes, Int64(Self.size), "a later pass does not see the entry")
        let aged = evictor.run(now: farFuture, removing: remover.remove)
        XCTAssertEqual(aged.evictedEntries, 1, "the entry of a file that left must stay evictable")
        XCTAssertEqual(remover.asked, [url])
        XCTAssertNil(store.loadMeta(forKey: url))
    }

    /// Removes what the evictor asks to, and keeps the URLs it asked for.
    private final class Remover {
        var asked: [String] = []

        func remove(_ url: String, _ remove: () -> Void) -> Bool {
            asked.append(url)
            remove()
            return true
        }
    }
}
