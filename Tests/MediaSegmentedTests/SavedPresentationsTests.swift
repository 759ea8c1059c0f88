// A VOD argument read from its saved documents with no request, and saved
// only once what was fetched parsed; a key that cannot be fetched offline
// leaves the VOD without it instead of failing the mount.
import Foundation
import XCTest
@testable import MediaSegmented
@testable import MediaSources
@testable import MediaStore
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport

final class SavedPresentationsTests: XCTestCase {
    private var root = ""
    private let url = "http://h.example/v/index.m3u8"
    private let media = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-PLAYLIST-TYPE:VOD\n"
        + "#EXTINF:2,\ns0.ts\n#EXTINF:2,\ns1.ts\n#EXT-X-ENDLIST\n"

    override func setUpWithError() throws {
        root = try TemporaryDirectory.make("saved-presentations")
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: root)
    }

    private func counting(_ texts: [String: String]) -> (ListingContext, Locked<Int>) {
        let asked = Locked(0)
        let context = ListingContext(clock: .system, fetchText: { url in
            asked.withLock { $0 += 1 }
            guard let text = texts[url] else { throw MediaError.io("\(url): Couldn't connect to server") }
            return text
        }, fetch: { _, _ in throw MediaError.io("Couldn't connect to server") })
        return (context, asked)
    }

    func testAPlaylistReadOnce_isReadAgainFromTheCacheWithNoRequest() throws {
        let saved = SavedPresentations(store: try CacheStore(root: root))
        let playlist = Playlist(location: url)
        let (online, asked) = counting([url: media])
        XCTAssertNil(saved.offline(online) { try playlist.list(in: $0) }, "nothing saved yet")
        let live = try XCTUnwrap(saved.live(online) { try playlist.list(in: $0) })
        XCTAssertEqual(asked.withLock { $0 }, 1)
        let (offline, askedOffline) = counting([:])
        let again = try XCTUnwrap(saved.offline(offline) { try playlist.list(in: $0) })
        XCTAssertEqual(askedOffline.withLock { $0 }, 0, "no request")
        XCTAssertEqual(again, live)
        XCTAssertEqual(again.first?.vod?.parts, live.first?.vod?.parts)
    }

    func testWhatDidNotParse_isNotSaved() throws {
        let saved = SavedPresentations(store: try CacheStore(root: root))
        let playlist = Playlist(location: url)
        let live = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\ns0.ts\n"
        XCTAssertThrowsError(try saved.live(counting([url: live]).0) { try playlist.list(in: $0) })
        XCTAssertNil(saved.offline(counting([:]).0) { try playlist.list(in: $0) })
    }

    func testAnEncryptedVODReadOffline_goesOnWithoutTheKeyItCannotFetch() throws {
        let store = try CacheStore(root: root)
        let encrypted = media.replacingOccurrences(of: "#EXTINF:2,\ns0.ts",
                                                   with: "#EXT-X-KEY:METHOD=AES-128,URI=\"k\"\n#EXTINF:2,\ns0.ts")
        try store.saveDocument(url: url, text: encrypted)
        let saved = SavedPresentations(store: store)
        let playlist = Playlist(location: url)
        XCTAssertThrowsError(try playlist.list(in: counting([url: encrypted]).0), "online, a key that fails fails the VOD")
        let offline = try XCTUnwrap(saved.offline(counting([:]).0) { try playlist.list(in: $0) })
        let vod = try XCTUnwrap(offline.first?.vod)
        XCTAssertTrue(vod.lacksKey(part: 0))
        XCTAssertEqual(vod.missingKey(among: [.init(part: 1, range: 0..<10)])?.errno, ENOKEY)
    }
}
