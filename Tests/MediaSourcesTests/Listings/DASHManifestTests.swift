// DASHManifest and DASHListing: static MPDs into parts (SegmentTemplate by
// number and by time, over a timeline or a duration; SegmentList;
// SegmentBase), BaseURLs resolved down the tree, identifiers filled in;
// live, multi-period, protected and out-of-bounds MPDs refused naming them.
import Foundation
import XCTest
@testable import MediaSources
@testable import MediaStore
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport

final class DASHManifestTests: XCTestCase {
    private let base = "http://h.example/v/manifest.mpd"

    private func mpd(_ body: String, attributes: String = #"type="static" mediaPresentationDuration="PT6S""#) -> Data {
        Data("""
            <?xml version="1.0"?>
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" \(attributes)>
            <Period>\(body)</Period>
            </MPD>
            """.utf8)
    }

    private func parts(_ body: String, attributes: String = #"type="static" mediaPresentationDuration="PT6S""#) throws -> [[String]] {
        try DASHManifest.parse(mpd(body, attributes: attributes), base: base, origin: "mpd").adaptationSets
            .flatMap(\.representations).map { $0.parts.map { $0.url + ($0.range.map { " \($0)" } ?? "") } }
    }

    private func assertRefused(_ xml: Data, mentioning words: [String], file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try DASHManifest.parse(xml, base: base, origin: "mpd"), file: file, line: line) { error in
            XCTAssertEqual((error as? MediaError)?.errno, EINVAL, "\(error)", file: file, line: line)
            for word in words { XCTAssertTrue("\(error)".contains(word), "\(error) lacks \(word)", file: file, line: line) }
        }
    }

    func testATimelineTemplate_givesInitThenNumberedSegments_withRepeats() throws {
        let got = try parts("""
            <AdaptationSet contentType="video"><Representation id="v1" bandwidth="1000" height="240">
            <SegmentTemplate timescale="10" initialization="init-$RepresentationID$.m4s" media="c-$RepresentationID$-$Number%05d$.m4s" startNumber="3">
            <SegmentTimeline><S t="0" d="20" r="1"/><S d="15"/></SegmentTimeline></SegmentTemplate>
            </Representation></AdaptationSet>
            """)
        XCTAssertEqual(got, [["http://h.example/v/init-v1.m4s", "http://h.example/v/c-v1-00003.m4s",
                              "http://h.example/v/c-v1-00004.m4s", "http://h.example/v/c-v1-00005.m4s"]])
    }

    func testATimeTemplate_andRepeatToTheEnd_fillTheTimes() throws {
        let got = try parts("""
            <AdaptationSet mimeType="audio/mp4"><SegmentTemplate timescale="1000" media="a/$Time$.m4s" initialization="a/i.m4s">
            <SegmentTimeline><S t="500" d="2000" r="-1"/></SegmentTimeline></SegmentTemplate>
            <Representation id="a" bandwidth="64000"/></AdaptationSet>
            """)
        // (6000 - 500) / 2000 rounded up: three segments.
        XCTAssertEqual(got, [["http://h.example/v/a/i.m4s", "http://h.example/v/a/500.m4s", "http://h.example/v/a/2500.m4s",
                              "http://h.example/v/a/4500.m4s"]])
    }

    func testADurationTemplate_coversThePeriod_andBaseURLsResolveDownTheTree() throws {
        let got = try parts("""
            <BaseURL>media/</BaseURL>
            <AdaptationSet contentType="video"><BaseURL>https://cdn.example/x/</BaseURL>
            <Representation id="r" bandwidth="1"><BaseURL>r/</BaseURL>
            <SegmentTemplate timescale="1000" duration="2500" media="$Number$.m4s" startNumber="0" initialization="$Bandwidth$.m4s"/>
            </Representation></AdaptationSet>
            """)
        XCTAssertEqual(got, [["https://cdn.example/x/r/1.m4s", "https://cdn.example/x/r/0.m4s", "https://cdn.example/x/r/1.m4s",
                              "https://cdn.example/x/r/2.m4s"]])
    }

    func testASegmentList_andASegmentBase_giveTheirURLsAndRanges() throws {
        let got = try parts("""
            <AdaptationSet contentType="video">
            <Representation id="list" bandwidth="2"><BaseURL>all.mp4</BaseURL><SegmentList>
            <Initialization range="0-99"/><SegmentURL mediaRange="100-199"/><SegmentURL media="other.m4s"/>
            </SegmentList></Representation>
            <Representation id="base" bandwidth="1"><BaseURL>whole.mp4</BaseURL><SegmentBase indexRange="0-10"/></Representation>
            </AdaptationSet>
            """)
        XCTAssertEqual(got, [["http://h.example/v/all.mp4 0..<100", "http://h.example/v/all.mp4 100..<200",
                              "http://h.example/v/other.m4s"], ["http://h.example/v/whole.mp4"]])
    }

    func testLiveMultiPeriodProtectedAndHostileMPDs_areRefusedNamingWhy() {
        assertRefused(mpd("", attributes: #"type="dynamic""#), mentioning: ["live"])
        assertRefused(Data("<MPD type=\"static\"><Period/><Period/></MPD>".utf8), mentioning: ["2 periods"])
        assertRefused(Data("<html/>".utf8), mentioning: ["not a DASH MPD"])
        assertRefused(Data("<MPD><Period>".utf8), mentioning: ["XML"])
        assertRefused(mpd(#"<AdaptationSet><ContentProtection/><Representation id="x" bandwidth="1"/></AdaptationSet>"#),
                      mentioning: ["DRM"])
        let template = { (attributes: String, timeline: String) in
            self.mpd("<AdaptationSet contentType=\"video\"><Representation id=\"x\" bandwidth=\"1\"><SegmentTemplate \(attributes)>"
                     + "\(timeline)</SegmentTemplate></Representation></AdaptationSet>")
        }
        assertRefused(template(#"media="$Number$" duration="0""#, ""), mentioning: ["duration"])
        assertRefused(template(#"media="$Number$" timescale="1" duration="1""#, "").replacingDuration("PT99999999999S"),
                      mentioning: ["segments"])
        assertRefused(template(#"media="$Number$""#, #"<SegmentTimeline><S d="1" r="99999999999"/></SegmentTimeline>"#),
                      mentioning: ["repeat"])
        assertRefused(template(#"media="$Number$" startNumber="4611686018427387903""#,
                               #"<SegmentTimeline><S d="1" r="3"/></SegmentTimeline>"#), mentioning: ["numbers"])
        assertRefused(template(#"media="$Time$""#, #"<SegmentTimeline><S t="4611686018427387900" d="2" r="3"/></SegmentTimeline>"#),
                      mentioning: ["times"])
        assertRefused(template(#"media="$Number$""#, #"<SegmentTimeline><S d="-1"/></SegmentTimeline>"#), mentioning: ["d"])
        assertRefused(template(#"media="$Nope$" duration="1""#, ""), mentioning: ["$Nope$"])
        assertRefused(template(#"media="$Number%99d$" duration="1""#, ""), mentioning: ["%0Nd"])
        assertRefused(template(#"media="ftp://h.example/$Number$" duration="1""#, ""), mentioning: ["http"])
    }

    func testISODurations() {
        XCTAssertEqual(DASHManifest.isoDuration("PT20.0S"), 20)
        XCTAssertEqual(DASHManifest.isoDuration("P1DT1H2M3.5S"), 86_400 + 3_723.5)
        XCTAssertEqual(DASHManifest.isoDuration("PT0H1M0S"), 60)
        XCTAssertNil(DASHManifest.isoDuration("P1Y"))
        XCTAssertNil(DASHManifest.isoDuration("PT-5S"))
        XCTAssertNil(DASHManifest.isoDuration("PT"))
        XCTAssertNil(DASHManifest.isoDuration("PT1e9S"))
        XCTAssertNil(DASHManifest.isoDuration("P99999999999999999999DT0S"))
    }

    func testAListing_isTheChosenVideoRepresentation_andOneFilePerAudioSet() throws {
        let xml = mpd("""
            <AdaptationSet contentType="video">
            <SegmentTemplate media="$RepresentationID$/$Number$.m4s" initialization="$RepresentationID$/i.m4s" duration="2"/>
            <Representation id="low" bandwidth="100" height="240"/><Representation id="high" bandwidth="900" height="720"/>
            </AdaptationSet>
            <AdaptationSet contentType="audio" lang="en"><SegmentTemplate media="en/$Number$.m4s" duration="2"/>
            <Representation id="a1" bandwidth="64"/><Representation id="a2" bandwidth="128"/></AdaptationSet>
            """)
        var context = ListingContext(clock: .system)
        let sources = try DASHListing.sources(url: base, xml: xml, name: nil, in: context)
        XCTAssertEqual(sources.map(\.name), ["manifest.mp4", "manifest.audio-en.mp4"])
        XCTAssertEqual(sources.map(\.url), [base + "#rep=high", base + "#rep=a2"])
        XCTAssertEqual(sources[0].vod?.parts.first?.url, "http://h.example/v/high/i.m4s")
        XCTAssertEqual(sources[0].vod?.parts.count, 4)
        context.hlsVariant = .lowest
        XCTAssertEqual(try DASHListing.sources(url: base, xml: xml, name: "Talk", in: context).map(\.url)[0], base + "#rep=low")
    }
}

private extension Data {
    func replacingDuration(_ duration: String) -> Data {
        Data(String(decoding: self, as: UTF8.self).replacingOccurrences(of: "PT6S", with: duration).utf8)
    }
}
