import Foundation
import XCTest
@testable import MediaCache
@testable import MediaSources
@testable import MediaSegmented
@testable import MediaStore
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport

/// The one interface every kind of source implements, as the catalog uses
/// it: a fake kind whose listing carries sizes, that refreshes or not, and
/// that fails on demand.
final class ListingTests: XCTestCase {
    /// A source kind whose entries the test sets, counting its listings.
    final class FakeListing: Listing, @unchecked Sendable {
        let origin: String
        let refreshes: Bool
        private let lock = NSLock()
        private var entries: [Source]
        private var failure: MediaError?
        private var calls = 0

        init(origin: String, refreshes: Bool = true, entries: [Source]) {
            self.origin = origin
            self.refreshes = refreshes
            self.entries = entries
        }

        var listings: Int { lock.withLock { calls } }
        func set(_ entries: [Source]) { lock.withLock { self.entries = entries } }
        func fail(_ error: MediaError?) { lock.withLock { failure = error } }

        func list(in context: ListingContext) throws -> [Source] {
            try lock.withLock {
                calls += 1
                if let failure { throw failure }
                return entries
            }
        }
    }

    private var base = ""
    fileprivate var fetcher = FakeFetcher()

    override func setUpWithError() throws {
        base = FileManager.default.temporaryDirectory.appendingPathComponent("mediafs-listing-\(UUID())").path
        fetcher = FakeFetcher()
    }

    override func tearDownWithError() throws {
        fetcher.shutdown()
        try? FileManager.default.removeItem(atPath: base)
    }

    fileprivate func catalog(_ listing: FakeListing, dirCacheTime: Double = 300, clock: Clock = .system) throws -> Catalog {
        var settings = LoaderSettings()
        settings.clock = clock
        return Catalog(sources: [Source(name: "library", url: "fake://library/", kind: .directory(listing))],
                       store: try CacheStore(root: base), fetcher: fetcher, settings: settings,
                       dirCacheTime: dirCacheTime)
    }

    func testAListingThatCarriesSizes_answersListAndStatWithNoRequest() throws {
        let info = ContentInfo(length: 1234, contentType: "video/mp4", etag: "\"v1\"",
                               lastModified: "Tue, 01 Dec 2026 10:00:00 GMT")
        let listing = FakeListing(origin: "fake", entries: [
            Source(name: "a.mp4", url: "https://a.example/a.mp4", kind: .file(info)),
            Source(name: "sub", url: "https://a.example/sub/", kind: .directory(FakeListing(origin: "sub", entries: []))),
        ])
        let c = try catalog(listing)
        let entries = try c.list("/library")
        XCTAssertEqual(entries.map(\.name), ["a.mp4", "sub"])
        XCTAssertEqual(entries.map(\.isDirectory), [false, true])
        XCTAssertEqual(entries.first?.knownAttributes?.size, 1234, "the listing's size is the entry's")
        XCTAssertEqual(try c.attributes(at: "/library/a.mp4")?.size, 1234)
        XCTAssertEqual(try c.list("/library/sub").count, 0)
        XCTAssertEqual(fetcher.requestCount, 0, "a listing that carries sizes needs no probe")
        XCTAssertEqual(listing.listings, 1)
    }

    func testAListingWithoutSizes_isProbed() throws {
        fetcher.add("https://a.example/b.mp4", bytes: Array(repeating: 7, count: 99))
        let listing = FakeListing(origin: "fake", entries: [Source(name: "b.mp4", url: "https://a.example/b.mp4")])
        let c = try catalog(listing)
        XCTAssertEqual(try c.list("/library").map(\.name), ["b.mp4"])
        XCTAssertEqual(try c.attributes(at: "/library/b.mp4")?.size, 99)
        XCTAssertGreaterThan(fetcher.requestCount, 0)
    }

    func testAFailedRefresh_servesTheLastListing_andNamesTheOrigin() throws {
        let listing = FakeListing(origin: "fake://library/", entries: [Source(name: "a.mp4", url: "https://a.example/a.mp4")])
        let c = try catalog(listing)
        XCTAssertEqual(try c.list("/library").map(\.name), ["a.mp4"])
        listing.fail(MediaError(EACCES, "fake://library/: HTTP 403"))
        XCTAssertThrowsError(try c.refresh("/library")) { error in
            XCTAssertEqual((error as? MediaError)?.errno, EACCES)
            XCTAssertTrue((error as? MediaError)?.message.contains("fake://library/") == true)
        }
        XCTAssertEqual(try c.list("/library").map(\.name), ["a.mp4"], "the last listing is served")
        listing.fail(nil)
        listing.set([Source(name: "c.mp4", url: "https://a.example/c.mp4")])
        try c.refresh("/library")
        XCTAssertEqual(try c.list("/library").map(\.name), ["c.mp4"])
        XCTAssertThrowsError(try c.attributes(at: "/library/a.mp4")) { XCTAssertEqual(($0 as? MediaError)?.errno, ENOENT) }
    }

    func testAFirstListingThatFails_failsTheLookup() throws {
        let listing = FakeListing(origin: "fake", entries: [])
        listing.fail(MediaError(EHOSTUNREACH, "fake: unreachable"))
        let c = try catalog(listing)
        XCTAssertThrowsError(try c.list("/library")) { XCTAssertEqual(($0 as? MediaError)?.errno, EHOSTUNREACH) }
    }

    func testOnlyAListingThatRefreshes_isListedAgainOnceDue() throws {
        let clock = TestClock()
        let refreshing = FakeListing(origin: "a", entries: [])
        let still = FakeListing(origin: "b", refreshes: false, entries: [])
        let a = try catalog(refreshing, dirCacheTime: 10, clock: clock.clock)
        _ = try a.list("/library")
        clock.advance(11)
        _ = try a.list("/library")
        XCTAssertTrue(drainListings(a))
        XCTAssertEqual(refreshing.listings, 2, "a due refresh runs in the background")
        // A cache of its own: the first catalog's background work may still
        // write into its own (removing it under that failed once in CI).
        let first = base
        defer { try? FileManager.default.removeItem(atPath: first) }
        base = first + "-second"
        let b = try catalog(still, dirCacheTime: 10, clock: clock.clock)
        _ = try b.list("/library")
        clock.advance(11)
        _ = try b.list("/library")
        XCTAssertTrue(drainListings(b))
        XCTAssertEqual(still.listings, 1, "a listing that does not refresh is listed once")
    }

    /// Waits until what the catalog's listings worker was given so far has
    /// run (its jobs run in order): a background refresh queued by then is
    /// done, and one not queued never will be. False after 10 s.
    fileprivate func drainListings(_ catalog: Catalog) -> Bool {
        let done = OneShot<Void>()
        guard catalog.listingService.refreshes.submit({ done.fulfil(()) }) else { return false }
        return done.wait(until: Deadline.after(seconds: 10, clock: .system)) != nil
    }
}

extension ListingTests {
    func testARemount_listsFromTheSavedListing_withItsSizes_thenRefreshes() throws {
        let info = ContentInfo(length: 4321, etag: "\"a\"")
        let listing = FakeListing(origin: "fake", entries: [
            Source(name: "a.mp4", url: "https://a.example/a.mp4", kind: .file(info)),
        ])
        let first = try catalog(listing)
        _ = try first.list("/library")
        first.stop()
        XCTAssertEqual(listing.listings, 1)
        listing.set([Source(name: "b.mp4", url: "https://a.example/b.mp4", kind: .file(info))])
        listing.fail(MediaError(EHOSTUNREACH, "fake: down"))
        let second = try catalog(listing)
        let entries = try second.list("/library")
        XCTAssertEqual(entries.map(\.name), ["a.mp4"], "the saved listing answers the first lookup")
        XCTAssertEqual(try second.attributes(at: "/library/a.mp4")?.size, 4321)
        XCTAssertEqual(fetcher.requestCount, 0)
        XCTAssertTrue(drainListings(second))
        XCTAssertEqual(listing.listings, 2, "the saved listing is refreshed at once")
        listing.fail(nil)
        try second.refresh("/library")
        XCTAssertEqual(try second.list("/library").map(\.name), ["b.mp4"])
        second.stop()
    }

    // MARK: Changes a listing shows

    private func readAll(_ loader: FileLoader, count: Int) throws -> [UInt8] {
        let pattern = ReadPattern()
        _ = loader.attach(pattern)
        defer { loader.release(pattern) }
        var buffer = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let n = try buffer[done...].withUnsafeMutableBytes {
                try loader.read(into: $0, at: Int64(done), pattern: pattern)
            }
            if n == 0 { break }
            done += n
        }
        return Array(buffer[..<done])
    }

    private static let date = "Tue, 01 Oct 2024 10:00:00 GMT"

    /// A file read whole, then a refresh whose listing shows it with
    /// `listed`: returns the loader's status after the refresh, and the
    /// bytes a read then gives.
    private func refreshShowing(_ listed: (ContentInfo) -> ContentInfo, newBytes: [UInt8]?,
                                retire: Bool = false) throws -> (cached: Int64, afterwards: [UInt8], requests: Int) {
        let url = "https://a.example/a.mp4"
        let old = [UInt8](repeating: 1, count: 300_000)
        fetcher.add(url, bytes: old)
        let info = ContentInfo(length: Int64(old.count), etag: "\"v1\"", lastModified: Self.date)
        let listing = FakeListing(origin: "fake", entries: [Source(name: "a.mp4", url: url, kind: .file(info))])
        let c = try catalog(listing)
        c.start()
        defer { c.stop() }
        XCTAssertTrue(try readAll(try c.file(at: "/library/a.mp4"), count: old.count) == old)
        if retire {
            // The loader gives way to its record, as one nobody uses does.
            XCTAssertEqual(c.maintenance.flushAndRetire(), 1)
        }
        if let newBytes {
            fetcher.update(url) { $0.bytes = newBytes; $0.etag = "\"v2\"" }
        }
        listing.set([Source(name: "a.mp4", url: url, kind: .file(listed(info)))])
        try c.refresh("/library")
        let requests = fetcher.requestCount
        let loader = try c.file(at: "/library/a.mp4")
        let cached = loader.status().present.byteCount
        let size = Int(try c.attributes(at: "/library/a.mp4")?.size ?? 0)
        return (cached, try readAll(loader, count: size), requests)
    }

    func testARefreshedListingWithAnotherETag_dropsTheCachedBytes_andReadsTheNewVersion() throws {
        let new = [UInt8](repeating: 2, count: 300_000)
        let result = try refreshShowing({ var i = $0; i.etag = "\"v2\""; return i }, newBytes: new)
        XCTAssertEqual(result.cached, 0, "the listing's change dropped the old bytes with no open")
        XCTAssertTrue(result.afterwards == new, "the new version is read")
    }

    func testARefreshedListingWithAnotherSize_changesAFileNobodyUses() throws {
        let new = [UInt8](repeating: 3, count: 200_000)
        let result = try refreshShowing({ var i = $0; i.length = Int64(new.count); i.etag = "\"v2\""; return i },
                                        newBytes: new, retire: true)
        XCTAssertEqual(result.cached, 0, "the record's metadata claimed bytes of the old version")
        XCTAssertTrue(result.afterwards == new, "the new version is read")
    }

    func testARefreshedListingWithAnotherDate_changesAFileWithoutETags() throws {
        let url = "https://a.example/a.mp4"
        let old = [UInt8](repeating: 1, count: 100_000), new = [UInt8](repeating: 4, count: 100_000)
        fetcher.add(url, bytes: old)
        fetcher.update(url) { $0.etag = nil }
        let info = ContentInfo(length: Int64(old.count), lastModified: Self.date)
        let listing = FakeListing(origin: "fake", entries: [Source(name: "a.mp4", url: url, kind: .file(info))])
        let c = try catalog(listing)
        c.start()
        defer { c.stop() }
        XCTAssertTrue(try readAll(try c.file(at: "/library/a.mp4"), count: old.count) == old)
        let later = "Tue, 01 Oct 2024 10:00:01 GMT"
        fetcher.update(url) { $0.bytes = new; $0.lastModified = later }
        var changed = info
        changed.lastModified = later
        listing.set([Source(name: "a.mp4", url: url, kind: .file(changed))])
        try c.refresh("/library")
        XCTAssertEqual(try c.file(at: "/library/a.mp4").status().present.byteCount, 0)
        XCTAssertTrue(try readAll(try c.file(at: "/library/a.mp4"), count: new.count) == new, "the new version is read")
    }

    func testARefreshedListingThatSaysLessOrTheSame_keepsTheCachedBytes() throws {
        // The same version, once as it was listed and once with what a
        // listing may lack (no ETag, no date) or give in another form (the
        // strong form of the ETag): nothing to drop, nothing fetched.
        for listed in [{ (i: ContentInfo) in i },
                       { (i: ContentInfo) in var c = i; c.etag = nil; c.lastModified = nil; return c },
                       { (i: ContentInfo) in var c = i; c.etag = "W/\"v1\""; return c },
                       { (i: ContentInfo) in var c = i; c.etag = nil; c.lastModified = "Tue, 01 Oct 2024 10:00:00 GMT"; return c }] {
            for retire in [false, true] {
                setUp()
                try setUpWithError()
                let result = try refreshShowing(listed, newBytes: nil, retire: retire)
                XCTAssertEqual(result.cached, 300_000, "retired: \(retire)")
                XCTAssertTrue(result.afterwards == [UInt8](repeating: 1, count: 300_000), "the cached version is read")
                XCTAssertEqual(fetcher.requestCount, result.requests, "served from the cache")
                try tearDownWithError()
            }
        }
    }

    /// nginx's index gives a length and no validator: the first answer of
    /// that length names the version (its ETag and date are kept), the read
    /// that asked is served, and nothing is dropped as a change.
    func testAListingThatGivesALengthAlone_takesTheFirstAnswersValidators() throws {
        let url = "https://a.example/a.mp4"
        let bytes = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        fetcher.add(url, bytes: bytes)
        let listing = FakeListing(origin: "fake", entries: [
            Source(name: "a.mp4", url: url, kind: .file(ContentInfo(length: Int64(bytes.count))))])
        let c = try catalog(listing)
        c.start()
        defer { c.stop() }
        XCTAssertEqual(try c.attributes(at: "/library/a.mp4")?.size, Int64(bytes.count))
        XCTAssertEqual(fetcher.requestCount, 0, "the listing's length needs no probe")
        let loader = try c.file(at: "/library/a.mp4")
        XCTAssertTrue(try readAll(loader, count: bytes.count) == bytes)
        let status = loader.status()
        XCTAssertEqual(status.info?.etag, "\"v1\"", "the first answer's ETag names the version")
        XCTAssertNotNil(status.info?.lastModified)
        XCTAssertEqual(status.cachedBytes, Int64(bytes.count), "nothing was dropped as a change")
        let requests = fetcher.requestCount
        XCTAssertTrue(try readAll(loader, count: bytes.count) == bytes)
        XCTAssertEqual(fetcher.requestCount, requests, "served from the cache")
    }

    /// A listed file (its length from the listing: no lookup, no probe):
    /// a player's first read at its start asks for what a lookup would
    /// have, the head, in one request, in the reader's account; its reads
    /// within the head send nothing more. Through the bench's 100 ms link
    /// a listed film's player sent 64, 96, 128 and 128 KiB one round trip
    /// after another (decision 0058). A background job's first read gets
    /// what it asks (issue 54).
    func testAListedFilesFirstReadAtItsStart_asksForTheLookupsHead_inOneRequest_andAJobsOnlyWhatItAsks() throws {
        let film = "https://a.example/film.mkv", job = "https://a.example/job.mkv"
        let size = 4 << 20
        let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 9) }
        fetcher.add(film, bytes: bytes)
        fetcher.add(job, bytes: bytes)
        let listing = FakeListing(origin: "fake", entries: [
            Source(name: "film.mkv", url: film, kind: .file(ContentInfo(length: Int64(size)))),
            Source(name: "job.mkv", url: job, kind: .file(ContentInfo(length: Int64(size))))])
        let c = try catalog(listing)
        c.start()
        defer { c.stop() }
        let head = LoaderSettings().probeFirstBytes
        let loader = try c.file(at: "/library/film.mkv")
        let process = ReaderProcess(pid: 9, startTime: 1, name: "ffmpeg", arguments: "", parentName: "")
        let pattern = ReadPattern(.player, account: ReaderBook().opened(by: process, as: .play, file: "/film.mkv"))
        loader.attach(pattern)
        let chunk = 64 << 10
        for offset in stride(from: 0, to: Int(head), by: chunk) {
            var buffer = [UInt8](repeating: 0, count: chunk)
            let n = try buffer.withUnsafeMutableBytes { try loader.read(into: $0, at: Int64(offset), pattern: pattern) }
            XCTAssertTrue(Array(buffer[..<n]) == Array(bytes[offset..<offset + chunk]), "bytes at \(offset)")
        }
        XCTAssertTrue(fetcher.waitUntil { $0.allRecords.allSatisfy(\.finished) })
        XCTAssertEqual(fetcher.gets.map(\.range), [0..<head], "\(fetcher.gets.map { $0.range! })")
        XCTAssertEqual(pattern.account?.bytesFetched, head, "the head's bytes were no one's")
        loader.release(pattern)
        let jobLoader = try c.file(at: "/library/job.mkv")
        let background = ReadPattern(readClass: .background)
        jobLoader.attach(background)
        var buffer = [UInt8](repeating: 0, count: chunk)
        _ = try buffer.withUnsafeMutableBytes { try jobLoader.read(into: $0, at: 0, pattern: background) }
        XCTAssertTrue(fetcher.waitUntil { $0.allRecords.allSatisfy(\.finished) })
        XCTAssertEqual(fetcher.gets.last?.range, 0..<Int64(chunk))
        jobLoader.release(background)
    }

    /// A listed length that no longer holds: the answer's length differs,
    /// which is a change (nothing of the listed length was cached), and a
    /// read never gets bytes of the wrong length or version.
    func testAListingsLengthThatNoLongerHolds_isAChange_neverWrongBytes() throws {
        let url = "https://a.example/a.mp4"
        let bytes = [UInt8](repeating: 9, count: 200_000)
        fetcher.add(url, bytes: bytes)
        let listing = FakeListing(origin: "fake", entries: [
            Source(name: "a.mp4", url: url, kind: .file(ContentInfo(length: 250_000)))])
        let c = try catalog(listing)
        c.start()
        defer { c.stop() }
        XCTAssertEqual(try c.attributes(at: "/library/a.mp4")?.size, 250_000)
        let loader = try c.file(at: "/library/a.mp4")
        if let first = try? readAll(loader, count: 250_000) {
            XCTAssertTrue(first == bytes, "a read gave \(first.count) bytes that are not the file's")
        }
        XCTAssertEqual(try c.attributes(at: "/library/a.mp4")?.size, Int64(bytes.count), "the server's length")
        XCTAssertTrue(try readAll(try c.file(at: "/library/a.mp4"), count: bytes.count) == bytes)
    }
}
