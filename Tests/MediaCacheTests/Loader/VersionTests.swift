// One version end to end: what counts as a change of the remote file, how
// a handle may use the kernel's page cache around a change, and deadlines
// that a step of the wall clock neither stretches nor cuts. Driven against
// a FakeFetcher whose resource a test replaces under the loader.
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

final class VersionTests: XCTestCase {
    private var base = ""
    private var store: CacheStore!
    private var fetcher: FakeFetcher!
    private let url = "https://media.example/films/changing.mkv"
    private static let mib = 1 << 20

    override func setUpWithError() throws {
        base = try TemporaryDirectory.make("versions")
        store = try CacheStore(root: base)
        fetcher = FakeFetcher(chunkSize: 64 << 10)
    }

    override func tearDownWithError() throws {
        fetcher.shutdown()
        try? FileManager.default.removeItem(atPath: base)
    }

    private func settings(timeout: Double = 5, clock: Clock = .system) -> LoaderSettings {
        var settings = LoaderSettings()
        settings.timeout = timeout
        settings.probeFirstBytes = 0
        settings.tailStretch = 0
        settings.link = nil
        settings.clock = clock
        return settings
    }

    private func makeLoader(_ settings: LoaderSettings) -> FileLoader {
        FileLoader(source: Source(name: "changing.mkv", url: url), store: store, fetcher: fetcher, settings: settings)
    }

    private static func bytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var random = SplitMix64(seed: seed)
        return random.bytes(count)
    }

    private func read(_ loader: FileLoader, _ pattern: ReadPattern, at offset: Int, count: Int) throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        let n = try buffer.withUnsafeMutableBytes { try loader.read(into: $0, at: Int64(offset), pattern: pattern) }
        return Array(buffer[..<n])
    }

    private func attached(_ loader: FileLoader) -> ReadPattern {
        let pattern = ReadPattern()
        loader.attach(pattern)
        return pattern
    }

    private func info(etag: String?, lastModified: String?, length: Int64 = 100) -> ContentInfo {
        ContentInfo(length: length, contentType: nil, etag: etag, lastModified: lastModified, acceptsRanges: true)
    }

    // MARK: What counts as a change

    func testDifference_namesEveryKindOfEvidenceAndOnlyThose() {
        let monday = "Mon, 30 Nov 2026 10:00:00 GMT", tuesday = "Tue, 01 Dec 2026 10:00:00 GMT"
        let cases: [(known: ContentInfo, etag: String?, modified: String?, length: Int64?, changed: Bool, why: String)] = [
            (info(etag: "\"a\"", lastModified: monday), "\"a\"", monday, 100, false, "same ETag, date and length"),
            (info(etag: "\"a\"", lastModified: monday), "\"b\"", monday, 100, true, "another ETag"),
            (info(etag: "\"a\"", lastModified: monday), "\"a\"", monday, 101, true, "another length"),
            (info(etag: "\"a\"", lastModified: monday), nil, tuesday, 100, true, "ETag gone, another date"),
            (info(etag: "\"a\"", lastModified: monday), nil, monday, 100, false, "ETag gone, same date: a proxy"),
            (info(etag: "\"a\"", lastModified: nil), nil, tuesday, 100, true, "ETag gone, nothing to compare"),
            (info(etag: nil, lastModified: monday), "\"a\"", tuesday, 100, true, "ETag appeared, another date"),
            (info(etag: nil, lastModified: monday), "\"a\"", monday, 100, false, "ETag appeared, same date"),
            (info(etag: nil, lastModified: monday), nil, tuesday, 100, true, "no ETags, another date"),
            (info(etag: nil, lastModified: monday), nil, monday, nil, false, "no ETags, same date, length unsaid"),
        ]
        for c in cases {
            let found = ChangeDetection.difference(from: c.known, etag: c.etag, lastModified: c.modified, length: c.length)
            XCTAssertEqual(found != nil, c.changed, "\(c.why): \(found ?? "no change")")
        }
    }

    /// The server replaces the file and stops sending an ETag: the next
    /// range request's If-Range fails and the answer is a 200 with the new
    /// body. Taken for a server without ranges, the new body was written
    /// beside the old bytes and the whole file read as a mix.
    func testA200ToIfRangeAfter206s_isAChange_notAServerWithoutRanges() throws {
        let size = 17 * Self.mib
        let old = Self.bytes(size, seed: 1), new = Self.bytes(size, seed: 2)
        fetcher.add(url, bytes: old)
        let loader = makeLoader(settings())
        let before = ReadPattern()
        loader.attach(before)
        XCTAssertEqual(try read(loader, before, at: 0, count: Self.mib), Array(old[..<Self.mib]))
        fetcher.update(url) { resource in
            resource.bytes = new
            resource.etag = nil
            resource.lastModified = "Wed, 02 Dec 2026 10:00:00 GMT"
        }
        XCTAssertThrowsError(try read(loader, before, at: 16 * Self.mib, count: Self.mib),
                             "a handle of the old version read on after the change")
        let after = ReadPattern()
        loader.attach(after)
        XCTAssertEqual(try read(loader, after, at: 16 * Self.mib, count: Self.mib),
                       Array(new[(16 * Self.mib)..<(17 * Self.mib)]))
        XCTAssertEqual(try read(loader, after, at: 0, count: size), new, "the whole file is not the new version")
        XCTAssertEqual(loader.status().info?.acceptsRanges, true, "the change was taken for a server without ranges")
        XCTAssertNil(loader.status().info?.etag)
        XCTAssertTrue(fetcher.gets.contains { $0.ifRange == "\"v1\"" && $0.range?.lowerBound == Int64(16 * Self.mib) },
                      "no range request carried the old ETag")
    }

    // MARK: The kernel's page cache around a change

    func testPageCache_afterAChange_isDroppedUntilTheKernelForgot_andBypassedWhileAnOldHandleReads() throws {
        fetcher.add(url, bytes: Self.bytes(Self.mib, seed: 3))
        let loader = makeLoader(settings())
        let told = Locked<[Int]>([])
        loader.onChange = { generation in
            told.withLock { $0.append(generation) }
            return true
        }
        _ = try loader.contentInfo()
        let old = ReadPattern()
        XCTAssertEqual(loader.attach(old), .keep)
        fetcher.update(url) { $0.etag = "\"v2\"" }
        XCTAssertTrue(loader.revalidate(olderThan: 0))
        XCTAssertEqual(told.withLock { $0 }, [1])

        let beside = ReadPattern()
        XCTAssertEqual(loader.attach(beside), .bypass, "a new handle would share pages with the old version's")
        loader.release(beside)
        loader.release(old)
        let first = ReadPattern()
        XCTAssertEqual(loader.attach(first), .drop, "kept pages before the kernel dropped the old ones")
        XCTAssertFalse(loader.awaitKernelForgot(timeout: 0.05))
        loader.kernelForgot(generation: 1)
        XCTAssertTrue(loader.awaitKernelForgot(timeout: 0.05))
        let later = ReadPattern()
        XCTAssertEqual(loader.attach(later), .keep)
        XCTAssertEqual(loader.attach(ReadPattern(), throughPageCache: false), .keep, "passthrough is no page-cache handle")
        loader.release(first)
        loader.release(later)
        XCTAssertEqual(loader.attach(ReadPattern()), .keep)
    }

    func testPageCache_withNoKernelToTell_isCleanAtOnce() throws {
        fetcher.add(url, bytes: Self.bytes(Self.mib, seed: 4))
        let loader = makeLoader(settings())
        _ = try loader.contentInfo()
        fetcher.update(url) { $0.etag = "\"v2\"" }
        XCTAssertTrue(loader.revalidate(olderThan: 0))
        XCTAssertEqual(loader.attach(ReadPattern()), .keep)
    }

    // MARK: Deadlines on the monotonic clock

    /// The injected clock's wall time steps back an hour while a read waits
    /// for bytes that never come: the read still gives up after its
    /// timeout, and what the loader stores (the last access) is wall time.
    func testAReadsDeadline_ignoresAStepOfTheWallClock() throws {
        fetcher.add(url, bytes: Self.bytes(Self.mib, seed: 5))
        let step = Locked(0.0)
        let start = Clock.system.wall()
        let clock = Clock(monotonic: Clock.system.monotonic, wall: { Clock.system.wall() + step.withLock { $0 } })
        let loader = makeLoader(settings(timeout: 1, clock: clock))
        _ = try loader.contentInfo()
        fetcher.hold()
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.3) { step.withLock { $0 = -3600 } }
        let began = Clock.system.monotonic()
        let pattern = ReadPattern()
        loader.attach(pattern)
        XCTAssertThrowsError(try read(loader, pattern, at: 0, count: 4096)) { error in
            XCTAssertTrue((error as? MediaError)?.message.contains("did not arrive within 1 s") == true, "\(error)")
        }
        let waited = Clock.system.monotonic() - began
        fetcher.release()
        XCTAssertGreaterThanOrEqual(waited, 0.9, "the wait was cut short")
        XCTAssertLessThan(waited, 30, "the wait was stretched by the wall clock's step")
        XCTAssertEqual(try read(loader, attached(loader), at: 0, count: 4096).count, 4096)
        let access = loader.lock.withLock { $0.use.lastAccess }
        XCTAssertEqual(access, start - 3600, accuracy: 5, "the last access is not the injected wall time")
    }

    func testConditionsTimedWait_endsAtItsDeadline() {
        let condition = Condition()
        let deadline = Deadline.after(seconds: 0.2, clock: .system)
        condition.lock()
        var woken = 0
        while condition.wait(until: deadline) { woken += 1 }
        condition.unlock()
        XCTAssertTrue(deadline.hasPassed)
        XCTAssertEqual(woken, 0, "woken without a signal")
    }
}
