// The freeing invariant, driven hard: reads from several handles while
// purges, trims and evictions run, and the content changes on the server.
// A byte claimed present (in memory or in the metadata on disk) must be in
// the data file, and no read may return a byte of neither version.
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

final class FreeingTests: XCTestCase {
    private var base = ""
    private var store: CacheStore!
    private var fetcher: FakeFetcher!
    private let url = "https://media.example/films/stress.mkv"

    override func setUpWithError() throws {
        base = try TemporaryDirectory.make("freeing")
        store = try CacheStore(root: base)
        fetcher = FakeFetcher(chunkSize: 16 << 10)
    }

    override func tearDownWithError() throws {
        fetcher.shutdown()
        try? FileManager.default.removeItem(atPath: base)
    }

    private func makeLoader() -> FileLoader {
        var settings = LoaderSettings()
        settings.timeout = 10
        return FileLoader(source: Source(name: "stress.mkv", url: url), store: store, fetcher: fetcher,
                          settings: settings)
    }

    private static func content(count: Int, seed: UInt64) -> [UInt8] {
        var random = SplitMix64(seed: seed)
        return random.bytes(count)
    }

    private static func read(_ loader: FileLoader, at offset: Int64, count: Int, pattern: ReadPattern) throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0xEE, count: count)
        let n = try buffer.withUnsafeMutableBytes { try loader.read(into: $0, at: offset, pattern: pattern) }
        return Array(buffer[..<n])
    }

    /// Every byte the metadata on disk claims, compared with the data file
    /// and `source`; returns the ranges that differ.
    private func claimsOnDiskThatLie(_ source: [UInt8]) -> [Range<Int64>] {
        guard let meta = store.loadMeta(forKey: url) else { return [] }
        let fd = open(store.directory(forKey: url) + "/data", O_RDONLY)
        guard fd >= 0 else { return meta.present.ranges }
        defer { close(fd) }
        return meta.present.ranges.filter { range in
            var bytes = [UInt8](repeating: 0, count: Int(range.count))
            let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(range.lowerBound)) }
            return n != bytes.count || bytes != Array(source[Int(range.lowerBound)..<Int(range.upperBound)])
        }
    }

    func testReadsDuringPurgesTrimsAndEvictions_neverReturnWrongBytes() throws {
        let length = 4 << 20
        let source = Self.content(count: length, seed: 7)
        fetcher.add(url, bytes: source)
        let loader = makeLoader()
        let stop = SharedValue(false)
        let readers = (0..<4).map { thread in
            Background { () -> (reads: Int, wrong: [String]) in
                var random = SplitMix64(seed: 100 + UInt64(thread))
                let pattern = ReadPattern()
                var wrong: [String] = []
                var reads = 0
                for step in 0..<400 {
                    let count = Int(4 << 10 + random.next() % (252 << 10))
                    let offset = Int64(random.next() % UInt64(length))
                    let got = try Self.read(loader, at: offset, count: count, pattern: pattern)
                    let end = min(Int(offset) + count, length)
                    if got != Array(source[Int(offset)..<end]) {
                        wrong.append("thread \(thread) step \(step): \(count) bytes at \(offset)")
                    }
                    reads += 1
                }
                loader.release(pattern)
                return (reads, wrong)
            }
        }
        let freer = Background { () -> Int in
            var random = SplitMix64(seed: 99)
            var freeings = 0
            while !stop.value {
                switch random.next() % 4 {
                case 0: loader.purge()
                case 1: loader.trim(to: Int64(random.next() % UInt64(length)))
                case 2: _ = loader.evict()
                default: loader.flush()
                }
                freeings += 1
                // Jitter, not a wait for anything: freeings land at random
                // points of the reads, with bytes cached between them to free.
                // A freeing costs about 2 ms under ThreadSanitizer, so they
                // run about 400 a second, two for each read.
                usleep(UInt32(random.next() % 200))
            }
            return freeings
        }
        var reads = 0
        var wrong: [String] = []
        for reader in readers {
            let outcome = try reader.result(timeout: 120)
            reads += outcome.reads
            wrong += outcome.wrong
        }
        stop.value = true
        let freeings = try freer.result()
        print("freeing stress: \(reads) reads, \(freeings) purges/trims/evictions/flushes, \(wrong.count) wrong")
        XCTAssertEqual(wrong, [])
        XCTAssertGreaterThan(freeings, 10)

        fetcher.waitUntil { _ in loader.status().state == .idle }
        loader.flush()
        XCTAssertEqual(claimsOnDiskThatLie(source), [])
        let pattern = ReadPattern()
        XCTAssertEqual(try Self.read(loader, at: 0, count: length, pattern: pattern), source)
    }

    /// Runs `freeing` while watching the entry's directory, and checks the
    /// order the kernel saw: the metadata renamed into place before the data
    /// file's first change (the punch or truncation), and not after it. So
    /// the metadata on disk now is the one that was there when the bytes
    /// went, and what a crash at that moment would have found.
    private func assertMetadataIsSavedBeforeTheDataFileChanges(_ freeing: () -> Void,
                                                               file: StaticString = #filePath,
                                                               line: UInt = #line) throws {
        let events = try DirectoryEvents(store.directory(forKey: url))
        freeing()
        let seen = events.take()
        let saved = seen.firstIndex(of: .renamedInto("meta"))
        let freed = seen.firstIndex(of: .modified("data"))
        guard let saved, let freed else {
            return XCTFail("no metadata save or no change to the data file: \(seen)", file: file, line: line)
        }
        XCTAssertLessThan(saved, freed, "the bytes went before the metadata stopped claiming them: \(seen)",
                          file: file, line: line)
        XCTAssertFalse(seen[freed...].contains(.renamedInto("meta")), "\(seen)", file: file, line: line)
    }

    func testAPurge_isOnDiskBeforeTheBytesAreFreed() throws {
        let source = Self.content(count: 1 << 20, seed: 3)
        fetcher.add(url, bytes: source)
        let loader = makeLoader()
        XCTAssertEqual(try Self.read(loader, at: 0, count: source.count, pattern: ReadPattern()), source)
        XCTAssertTrue(fetcher.waitUntil { _ in loader.status().state == .idle })
        loader.flush()
        XCTAssertEqual(store.loadMeta(forKey: url)?.present.byteCount, Int64(source.count))
        try assertMetadataIsSavedBeforeTheDataFileChanges { loader.purge() }
        // No flush: the metadata in place as the file was emptied claims nothing.
        XCTAssertEqual(store.loadMeta(forKey: url)?.present.byteCount ?? 0, 0)
        XCTAssertEqual(claimsOnDiskThatLie(source), [])
    }

    func testATrim_isOnDiskBeforeTheBytesAreFreed() throws {
        let source = Self.content(count: 1 << 20, seed: 4)
        fetcher.add(url, bytes: source)
        let loader = makeLoader()
        XCTAssertEqual(try Self.read(loader, at: 0, count: source.count, pattern: ReadPattern()), source)
        XCTAssertTrue(fetcher.waitUntil { _ in loader.status().state == .idle })
        loader.flush()
        try assertMetadataIsSavedBeforeTheDataFileChanges { loader.trim(to: 300_000) }
        // The metadata in place as the holes were punched claims only what is left.
        XCTAssertEqual(store.loadMeta(forKey: url)?.present.byteCount, 300_000)
        XCTAssertEqual(claimsOnDiskThatLie(source), [])
    }

    func testAChangeDuringReads_givesEachReadOneVersionOrAnError() throws {
        let length = 2 << 20
        let first = Self.content(count: length, seed: 1)
        let second = Self.content(count: length, seed: 2)
        fetcher.add(url, bytes: first)
        fetcher.setChunkDelay(0.001)
        let loader = makeLoader()
        // The change comes once every reader has read: during the reads, not before them.
        let reading = DispatchSemaphore(value: 0)
        let readers = (0..<3).map { thread in
            Background { () -> (versions: Set<Int>, wrong: [String]) in
                var random = SplitMix64(seed: 200 + UInt64(thread))
                var wrong: [String] = []
                var versions = Set<Int>()
                for step in 0..<150 {
                    // A new handle now and then: one that was open across
                    // the change fails, as it should.
                    let pattern = ReadPattern()
                    loader.attach(pattern)
                    let count = Int(4 << 10 + random.next() % (124 << 10))
                    let offset = Int(random.next() % UInt64(length - count))
                    let read = try? Self.read(loader, at: Int64(offset), count: count, pattern: pattern)
                    if step == 0 { reading.signal() }
                    guard let got = read else { continue }
                    if got == Array(first[offset..<offset + count]) {
                        versions.insert(1)
                    } else if got == Array(second[offset..<offset + count]) {
                        versions.insert(2)
                    } else {
                        wrong.append("thread \(thread) step \(step): \(count) bytes at \(offset)")
                    }
                    loader.release(pattern)
                }
                return (versions, wrong)
            }
        }
        for _ in readers { XCTAssertEqual(reading.wait(timeout: .now() + 60), .success, "a reader never read") }
        fetcher.update(url) { resource in
            resource.bytes = second
            resource.etag = "\"v2\""
        }
        var wrong: [String] = []
        var versions = Set<Int>()
        for reader in readers {
            let outcome = try reader.result(timeout: 120)
            wrong += outcome.wrong
            versions.formUnion(outcome.versions)
        }
        XCTAssertEqual(wrong, [])
        XCTAssertTrue(versions.contains(2), "no read saw the new version")
        fetcher.waitUntil { _ in loader.status().state == .idle }
        loader.flush()
        XCTAssertEqual(claimsOnDiskThatLie(second), [])
    }
}
