// HLSPlaylist and HLSListing: media and master playlists parsed into parts,
// byte ranges bounded and checked, live and encrypted playlists refused
// naming what they are, a variant chosen as --hls-variant says.
import XCTest
@testable import MediaSources
@testable import MediaStore
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport

final class HLSPlaylistTests: XCTestCase {
    private let base = "http://h.example/v/index.m3u8"

    private func media(_ text: String) throws -> HLSPlaylist.Media {
        guard case .media(let media) = try HLSPlaylist.parse(text, base: base, origin: "pl") else {
            throw MediaError(EINVAL, "not a media playlist")
        }
        return media
    }

    private func assertRefused(_ text: String, mentioning words: [String], file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try HLSPlaylist.parse(text, base: base, origin: "pl"), file: file, line: line) { error in
            XCTAssertEqual((error as? MediaError)?.errno, EINVAL, "\(error)", file: file, line: line)
            for word in words { XCTAssertTrue("\(error)".contains(word), "\(error) lacks \(word)", file: file, line: line) }
        }
    }

    func testAVODMediaPlaylist_givesItsSegmentsInOrder_resolvedAgainstThePlaylist() throws {
        let parsed = try media("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-PLAYLIST-TYPE:VOD\n#EXTINF:2,\nseg0.ts\n"
                               + "#EXTINF:2,\n/abs/seg1.ts\n#EXTINF:2,\nhttps://cdn.example/seg2.ts\n")
        XCTAssertTrue(parsed.ends)
        XCTAssertNil(parsed.map)
        XCTAssertEqual(parsed.segments.map(\.url), ["http://h.example/v/seg0.ts", "http://h.example/abs/seg1.ts",
                                                     "https://cdn.example/seg2.ts"])
        XCTAssertEqual(parsed.segments.map(\.range), [nil, nil, nil])
    }

    func testByteRanges_withAndWithoutOffsets_followOneAnother() throws {
        let parsed = try media("""
            #EXTM3U
            #EXT-X-MAP:URI="all.mp4",BYTERANGE="800@0"
            #EXTINF:2,
            #EXT-X-BYTERANGE:1000@800
            all.mp4
            #EXTINF:2,
            #EXT-X-BYTERANGE:500
            all.mp4
            #EXT-X-ENDLIST
            """)
        XCTAssertEqual(parsed.map, .init(url: "http://h.example/v/all.mp4", range: 0..<800))
        XCTAssertEqual(parsed.segments.map(\.range), [800..<1800, 1800..<2300])
        XCTAssertTrue(parsed.ends)
    }

    func testAPlaylistWithoutAnEnd_parses_butHLSListingRefusesItAsLive() throws {
        let text = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\nseg0.ts\n"
        XCTAssertFalse(try media(text).ends)
        XCTAssertThrowsError(try HLSListing.sources(url: base, text: text, name: nil, in: ListingContext(clock: .system))) { error in
            XCTAssertTrue("\(error)".contains("live"), "\(error)")
            XCTAssertTrue("\(error)".contains(base), "\(error)")
        }
    }

    func testHostileByteRanges_areRefusedNamingTheLine() {
        assertRefused("#EXTM3U\n#EXT-X-BYTERANGE:99999999999999999999@0\na.ts\n", mentioning: ["pl:2"])
        assertRefused("#EXTM3U\n#EXT-X-BYTERANGE:-5@0\na.ts\n", mentioning: ["pl:2"])
        assertRefused("#EXTM3U\n#EXT-X-BYTERANGE:4611686018427387903@4611686018427387903\na.ts\n", mentioning: ["pl:2"])
        assertRefused("#EXTM3U\n#EXT-X-BYTERANGE:0@0\na.ts\n", mentioning: ["pl:2"])
        assertRefused("#EXTM3U\n#EXT-X-BYTERANGE:10\na.ts\n", mentioning: ["pl:3", "same URI"])
        assertRefused("#EXTM3U\n#EXT-X-BYTERANGE:10@0\na.ts\n#EXT-X-BYTERANGE:10\nb.ts\n", mentioning: ["pl:5"])
        assertRefused("#EXTM3U\n#EXT-X-MAP:URI=\"i.mp4\",BYTERANGE=\"10\"\na.ts\n", mentioning: ["pl:2", "offset"])
    }

    func testLengthsThatSumPastTheLimit_failTheLayout() throws {
        let vod = SegmentedVOD(url: base, parts: [.init(url: "http://h.example/a", range: nil),
                                                  .init(url: "http://h.example/b", range: nil)], contentType: "video/mp2t")
        XCTAssertThrowsError(try vod.layout(lengths: [Limits.maxLength, 1]))
        XCTAssertThrowsError(try vod.layout(lengths: [5, -1]))
        XCTAssertEqual(try vod.layout(lengths: [5, 7]).length, 12)
    }

    func testEncryptedPlaylists_areRefusedNamingTheMethodAndKeyFormat() {
        assertRefused("#EXTM3U\n#EXT-X-KEY:METHOD=SAMPLE-AES,URI=\"k\",KEYFORMAT=\"com.apple.streamingkeydelivery\"\na.ts\n",
                      mentioning: ["SAMPLE-AES", "com.apple.streamingkeydelivery", "pl:2"])
        assertRefused("#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"k\",KEYFORMAT=\"urn:uuid:edef8ba9\"\na.ts\n",
                      mentioning: ["urn:uuid:edef8ba9"])
        assertRefused("#EXTM3U\n#EXT-X-KEY:METHOD=AES-128\na.ts\n", mentioning: ["URI"])
        assertRefused("#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"k\",IV=0x12\na.ts\n", mentioning: ["IV"])
        assertRefused("#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"k\",IV=0x+0000000000000000000000000000000\na.ts\n",
                      mentioning: ["IV"])
        assertRefused("#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"k\"\n#EXT-X-MAP:URI=\"i.mp4\"\na.m4s\n",
                      mentioning: ["init segment"])
        XCTAssertNoThrow(try media("#EXTM3U\n#EXT-X-KEY:METHOD=NONE\na.ts\n#EXT-X-ENDLIST\n"))
    }

    func testAES128_givesEachSegmentItsKeyAndIV_theSequenceNumberWhenTheTagHasNone() throws {
        let parsed = try media("""
            #EXTM3U
            #EXT-X-MEDIA-SEQUENCE:258
            #EXT-X-KEY:METHOD=AES-128,URI="k1"
            #EXTINF:2,
            a.ts
            #EXTINF:2,
            b.ts
            #EXT-X-KEY:METHOD=AES-128,URI="/k2",IV=0x000102030405060708090A0B0C0D0E0F
            #EXTINF:2,
            c.ts
            #EXT-X-KEY:METHOD=NONE
            #EXTINF:2,
            d.ts
            #EXT-X-ENDLIST
            """)
        XCTAssertEqual(parsed.segments.map { $0.encryption?.keyURL }, ["http://h.example/v/k1", "http://h.example/v/k1",
                                                                      "http://h.example/k2", nil])
        XCTAssertEqual(parsed.segments[0].encryption?.iv, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2])
        XCTAssertEqual(parsed.segments[1].encryption?.iv, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 3])
        XCTAssertEqual(parsed.segments[2].encryption?.iv, Array(0...15))
    }

    func testAKeyOnAnotherOrigin_isRefused_withoutBeingFetched() {
        let fetched = Locked<[String]>([])
        let context = ListingContext(clock: .system, fetchText: { _ in "" }, fetch: { request, _ in
            fetched.withLock { $0.append(request.url) }
            return TextFetch.Answer(status: 200, body: Data(repeating: 1, count: 16))
        })
        let text = "#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"https://keys.example/k\"\n#EXTINF:2,\na.ts\n#EXT-X-ENDLIST\n"
        XCTAssertThrowsError(try HLSListing.sources(url: base, text: text, name: nil, in: context)) { error in
            XCTAssertTrue("\(error)".contains("origin"), "\(error)")
        }
        XCTAssertEqual(fetched.withLock { $0 }, [])
        let short = ListingContext(clock: .system, fetchText: { _ in "" }, fetch: { _, _ in TextFetch.Answer(status: 200, body: Data(count: 15)) })
        XCTAssertThrowsError(try HLSListing.sources(url: base, text: text.replacingOccurrences(of: "https://keys.example/k", with: "k"),
                                                    name: nil, in: short)) { error in
            XCTAssertTrue("\(error)".contains("15 bytes"), "\(error)")
        }
    }

    func testNotHLS_andMalformedAttributes_areRefused() {
        assertRefused("#EXT-X-ENDLIST\na.ts\n", mentioning: ["#EXTM3U"])
        assertRefused("#EXTM3U\n#EXT-X-MAP:URI=\"unclosed\na.ts\n", mentioning: ["quote"])
        assertRefused("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=x\nlow.m3u8\n", mentioning: ["BANDWIDTH"])
        assertRefused("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1,RESOLUTION=big\nlow.m3u8\n", mentioning: ["RESOLUTION"])
        assertRefused("#EXTM3U\nftp://h.example/a.ts\n", mentioning: ["http(s) only"])
        assertRefused("#EXTM3U\ngopher://h.example/a.ts\n", mentioning: ["gopher"])
    }

    private let masterText = """
        #EXTM3U
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",LANGUAGE="en",NAME="English",URI="audio/en.m3u8"
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",LANGUAGE="fr",NAME="French",URI="audio/fr.m3u8"
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="other",NAME="x",URI="audio/x.m3u8"
        #EXT-X-STREAM-INF:BANDWIDTH=800000,RESOLUTION=640x360,AUDIO="aud"
        low/index.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=2500000,RESOLUTION=1280x720,AUDIO="aud"
        mid/index.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=5000000,RESOLUTION=1920x1080,AUDIO="aud"
        high/index.m3u8
        """

    func testAMasterPlaylist_givesVariantsAndRenditions() throws {
        guard case .master(let master) = try HLSPlaylist.parse(masterText, base: "http://h.example/m.m3u8", origin: "m") else {
            return XCTFail("not a master playlist")
        }
        XCTAssertEqual(master.variants.map(\.bandwidth), [800_000, 2_500_000, 5_000_000])
        XCTAssertEqual(master.variants.map(\.height), [360, 720, 1080])
        XCTAssertEqual(master.renditions.map(\.url), ["http://h.example/audio/en.m3u8", "http://h.example/audio/fr.m3u8",
                                                       "http://h.example/audio/x.m3u8"])
        let pick = { (choice: HLSListing.VariantChoice) in
            URLComponents(string: HLSListing.choose(master.variants, choice).url)!.path
        }
        XCTAssertEqual(pick(.highest), "/high/index.m3u8")
        XCTAssertEqual(pick(.lowest), "/low/index.m3u8")
        XCTAssertEqual(pick(.height(720)), "/mid/index.m3u8")
        XCTAssertEqual(pick(.height(900)), "/mid/index.m3u8")
        XCTAssertEqual(pick(.height(100)), "/low/index.m3u8")
        XCTAssertEqual(HLSListing.VariantChoice("720p"), .height(720))
        XCTAssertNil(HLSListing.VariantChoice("best"))
    }

    func testAMasterPlaylist_becomesItsVariantsFile_andOneFilePerAudioRenditionOfItsGroup() throws {
        let fetched = Locked<[String]>([])
        let media = "#EXTM3U\n#EXT-X-MAP:URI=\"init.mp4\"\n#EXTINF:2,\n#EXT-X-BYTERANGE:100@0\ns.m4s\n#EXT-X-ENDLIST\n"
        let context = ListingContext(clock: .system, fetchText: { url in
            fetched.withLock { $0.append(url) }
            return media
        })
        var lowest = context
        lowest.hlsVariant = .lowest
        let sources = try HLSListing.sources(url: "http://h.example/talk.m3u8", text: masterText, name: nil, in: lowest)
        XCTAssertEqual(sources.map(\.name), ["talk.mp4", "talk.audio-en.mp4", "talk.audio-fr.mp4"])
        XCTAssertEqual(sources.map(\.url), fetched.withLock { $0 })
        XCTAssertEqual(sources[0].url, "http://h.example/low/index.m3u8")
        XCTAssertNil(sources[0].listedInfo, "the init segment's length is not listed")
        XCTAssertNotNil(sources[0].vod)
    }

    func testASingleFilePlaylist_isListedWithItsExactLength_andNeedsNoProbe() throws {
        let text = "#EXTM3U\n#EXT-X-PLAYLIST-TYPE:VOD\n#EXTINF:2,\n#EXT-X-BYTERANGE:1000@0\nall.ts\n"
            + "#EXTINF:2,\n#EXT-X-BYTERANGE:2345@1000\nall.ts\n"
        let sources = try HLSListing.sources(url: base, text: text, name: "Talk", in: ListingContext(clock: .system))
        XCTAssertEqual(sources.map(\.name), ["Talk.ts"])
        XCTAssertEqual(sources[0].listedInfo?.length, 3345)
        XCTAssertEqual(sources[0].listedInfo?.contentType, "video/mp2t")
        XCTAssertNotNil(sources[0].listedInfo?.etag)
    }
}
