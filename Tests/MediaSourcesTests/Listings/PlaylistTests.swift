import Foundation
import XCTest
@testable import MediaSources
@testable import MediaStore
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport
#if canImport(Glibc)
import Glibc
#endif

final class PlaylistTests: XCTestCase {
    private func parse(_ text: String, base: String? = "http://media.example/lists/pl.m3u",
                       origin: String = "pl.m3u") throws -> [(name: String?, url: String)] {
        try Playlist.parse(text, base: base, origin: origin)
    }

    private func assertEntries(_ entries: [(name: String?, url: String)], _ expected: [(String?, String)],
                               file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(entries.count, expected.count, "\(entries)", file: file, line: line)
        for (got, want) in zip(entries, expected) {
            XCTAssertEqual(got.name, want.0, file: file, line: line)
            XCTAssertEqual(got.url, want.1, file: file, line: line)
        }
    }

    private func assertRefused(_ text: String, base: String? = nil, origin: String = "/srv/pl.m3u",
                               mentioning parts: [String], file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try Playlist.parse(text, base: base, origin: origin), file: file, line: line) { error in
            XCTAssertEqual((error as? MediaError)?.errno, EINVAL, file: file, line: line)
            for part in parts {
                XCTAssertTrue("\(error)".contains(part), "'\(error)' lacks '\(part)'", file: file, line: line)
            }
        }
    }

    // MARK: Recognising playlists

    func testIsPlaylist_recognisesM3uAndM3u8PathsAndUrlsInAnyCase() {
        XCTAssertTrue(Playlist.isPlaylist("/home/me/music.m3u"))
        XCTAssertTrue(Playlist.isPlaylist("radio.M3U8"))
        XCTAssertTrue(Playlist.isPlaylist("http://a.example/x/list.m3u8"))
        XCTAssertTrue(Playlist.isPlaylist("https://a.example/list.m3u?token=abc"))
    }

    func testIsPlaylist_rejectsMediaFilesListFilesAndLookalikes() {
        XCTAssertFalse(Playlist.isPlaylist("http://a.example/film.mp4"))
        XCTAssertFalse(Playlist.isPlaylist("/etc/films.list"))
        XCTAssertFalse(Playlist.isPlaylist("http://a.example/list.m3u/"))
        XCTAssertFalse(Playlist.isPlaylist("http://a.example/song.mp3?fmt=.m3u#x"))
        XCTAssertFalse(Playlist.isPlaylist("http://a.example/m3u"))
    }

    // MARK: Plain and extended M3U

    func testParse_plainM3u_givesOneUnnamedEntryPerUrlLine() throws {
        let entries = try parse("""
            http://a.example/one.mp3
            # comment

            https://b.example/dir/two.ogg
            """, base: nil)
        assertEntries(entries, [(nil, "http://a.example/one.mp3"), (nil, "https://b.example/dir/two.ogg")])
    }

    func testParse_extinfTitle_namesTheNextEntryWithTheUrlsExtension() throws {
        let entries = try parse("""
            #EXTM3U
            #EXTINF:123,Artist - Song
            http://a.example/track1.mp3
            http://a.example/track2.mp3
            """)
        assertEntries(entries, [("Artist - Song.mp3", "http://a.example/track1.mp3"),
                                (nil, "http://a.example/track2.mp3")])
    }

    func testParse_titleWithCommas_keepsEverythingAfterTheFirstComma() throws {
        let entries = try parse("#EXTM3U\n#EXTINF:-1 tvg-id=\"x\" group-title=\"News\",Live, Loud, Late\nhttp://a.example/s.ts\n")
        assertEntries(entries, [("Live, Loud, Late.ts", "http://a.example/s.ts")])
    }

    func testParse_titleWithSlashes_becomesASafeNameThroughSource() throws {
        let entries = try parse("#EXTINF:200,AC/DC - Back/In Black\nhttp://a.example/b.flac\n")
        XCTAssertEqual(entries.count, 1)
        let name = try XCTUnwrap(entries.first?.name)
        XCTAssertEqual(FileNaming.safe(name), "AC_DC - Back_In Black.flac")
    }

    func testParse_titleAlreadyEndingWithTheExtension_getsNoSecondOne() throws {
        let entries = try parse("#EXTINF:5,Trailer.MP4\nhttp://a.example/t.mp4\n#EXTINF:5,clip\nhttp://a.example/noext\n")
        assertEntries(entries, [("Trailer.MP4", "http://a.example/t.mp4"), ("clip", "http://a.example/noext")])
    }

    func testParse_extinfWithoutTitle_leavesTheEntryUnnamed() throws {
        let entries = try parse("#EXTINF:10,\nhttp://a.example/a.mp3\n#EXTINF:10\nhttp://a.example/b.mp3\n")
        assertEntries(entries, [(nil, "http://a.example/a.mp3"), (nil, "http://a.example/b.mp3")])
    }

    func testParse_titleIsNotCarriedPastItsEntry() throws {
        let entries = try parse("#EXTINF:1,First\nhttp://a.example/1.mp3\n#EXTVLCOPT:foo\nhttp://a.example/2.mp3\n")
        assertEntries(entries, [("First.mp3", "http://a.example/1.mp3"), (nil, "http://a.example/2.mp3")])
    }

    func testParse_byteOrderMarkAndCrlf_areIgnored() throws {
        let entries = try parse("\u{FEFF}#EXTM3U\r\n#EXTINF:1,Bom Title\r\nhttp://a.example/x.mp3\r\n\r\nhttp://a.example/y.mp3\r\n",
                                base: nil)
        assertEntries(entries, [("Bom Title.mp3", "http://a.example/x.mp3"), (nil, "http://a.example/y.mp3")])
    }

    func testParse_bomBeforeAPlainUrl_isNotPartOfTheUrl() throws {
        let entries = try parse("\u{FEFF}http://a.example/x.mp3\n", base: nil)
        assertEntries(entries, [(nil, "http://a.example/x.mp3")])
    }

    func testParse_surroundingSpaces_areTrimmed() throws {
        let entries = try parse("  #EXTINF:1,  Spaced Out  \n   http://a.example/s.mp3   \n", base: nil)
        assertEntries(entries, [("Spaced Out.mp3", "http://a.example/s.mp3")])
    }

    // MARK: Relative entries

    func testParse_relativeEntries_resolveAgainstThePlaylistsUrl() throws {
        let entries = try parse("""
            #EXTM3U
            song.mp3
            sub/dir/two.mp3
            ../up.mp3
            /root.mp3
            //cdn.example/abs.mp3
            with%20space.mp3
            """, base: "http://media.example/lists/pl.m3u?user=1")
        assertEntries(entries, [(nil, "http://media.example/lists/song.mp3"),
                                (nil, "http://media.example/lists/sub/dir/two.mp3"),
                                (nil, "http://media.example/up.mp3"),
                                (nil, "http://media.example/root.mp3"),
                                (nil, "http://cdn.example/abs.mp3"),
                                (nil, "http://media.example/lists/with%20space.mp3")])
    }

    func testParse_relativeEntryWithoutBase_isRefusedNamingFileAndLine() {
        assertRefused("#EXTM3U\nhttp://a.example/ok.mp3\n\n#EXTINF:1,x\nmusic/b.mp3\n",
                      mentioning: ["/srv/pl.m3u:5", "music/b.mp3"])
    }

    func testParse_lineNumbersCountCrlfLinesOnce() {
        assertRefused("#EXTM3U\r\nhttp://a.example/ok.mp3\r\nrelative.mp3\r\n", mentioning: ["/srv/pl.m3u:3"])
    }

    func testParse_unsupportedSchemeEntry_isRefusedNamingFileAndLine() {
        assertRefused("http://a.example/ok.mp3\ngopher://a.example/b.mp3\n", mentioning: ["/srv/pl.m3u:2", "gopher"])
    }

    func testParse_fileUrlEntry_isRefused() {
        assertRefused("file:///etc/passwd\n", mentioning: ["/srv/pl.m3u:1"])
    }

    // MARK: HLS

    func testParse_hlsMediaPlaylist_isRefusedAsAStream() {
        assertRefused("""
            #EXTM3U
            #EXT-X-VERSION:3
            #EXT-X-TARGETDURATION:10
            #EXT-X-MEDIA-SEQUENCE:0
            #EXTINF:9.97,
            seg0.ts
            #EXT-X-ENDLIST
            """, base: "http://live.example/stream/index.m3u8", origin: "http://live.example/stream/index.m3u8",
                      mentioning: ["HLS", "http://live.example/stream/index.m3u8"])
    }

    func testParse_hlsMasterPlaylist_isRefusedAsAStream() {
        assertRefused("""
            #EXTM3U
            #EXT-X-STREAM-INF:BANDWIDTH=1280000,RESOLUTION=640x360
            low/index.m3u8
            #EXT-X-STREAM-INF:BANDWIDTH=2560000
            high/index.m3u8
            """, base: "http://live.example/master.m3u8", origin: "master.m3u8", mentioning: ["HLS", "master.m3u8"])
    }

    func testParse_hlsTagAfterEntries_stillRefusesTheWholePlaylist() {
        assertRefused("#EXTM3U\nhttp://a.example/a.ts\n#EXT-X-ENDLIST\n", mentioning: ["HLS"])
    }

    // MARK: Through Source

    func testSource_localPlaylistFile_givesSafeNamedSourcesInOrder() throws {
        let dir = try TemporaryDirectory.make("playlist")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = "\(dir)/mix.m3u8"
        let text = "\u{FEFF}#EXTM3U\r\n#EXTINF:1,A/B: C\r\nhttp://a.example/x/one.mp3\r\nhttp://a.example/x/Two%20Words.ogg\r\n"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(text.utf8)))
        XCTAssertEqual(try Source.parse(arguments: [path], clock: .system), [
            Source(name: "A_B: C.mp3", url: "http://a.example/x/one.mp3"),
            Source(name: "Two Words.ogg", url: "http://a.example/x/Two%20Words.ogg"),
        ])
    }

    func testSource_playlistUrl_isFetchedAndItsRelativeEntriesResolved() throws {
        let fetched = Locked<[String]>([])
        let sources = try Source.parse(arguments: ["http://u:p@media.example/l/pl.m3u"], clock: .system) { url in
            fetched.withLock { $0.append(url) }
            return "#EXTINF:1,Intro\nintro.mp3\n"
        }
        XCTAssertEqual(fetched.withLock { $0 }, ["http://u:p@media.example/l/pl.m3u"])
        XCTAssertEqual(sources.map(\.name), ["Intro.mp3"])
        XCTAssertEqual(sources.first.map { URLComponents(string: $0.url)?.path }, "/l/intro.mp3")
    }

    func testSource_hlsPlaylistUrl_errorDoesNotShowCredentials() {
        XCTAssertThrowsError(try Source.parse(arguments: ["http://u:secret@live.example/index.m3u8"], clock: .system) { _ in
            "#EXTM3U\n#EXT-X-TARGETDURATION:6\n"
        }) { error in
            XCTAssertTrue("\(error)".contains("HLS"), "\(error)")
            XCTAssertFalse("\(error)".contains("secret"), "\(error)")
        }
    }
}
