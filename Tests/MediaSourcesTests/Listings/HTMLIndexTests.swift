import Foundation
import XCTest
@testable import MediaSources
@testable import MediaStore
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport

final class HTMLIndexTests: XCTestCase {
    private let base = "http://files.example/media/"

    private func names(_ entries: [HTMLIndex.Entry]) -> [String] { entries.map(\.name) }

    // MARK: Real-world index pages

    private let nginxAutoindex = """
        <html>\r
        <head><title>Index of /media/</title></head>\r
        <body>\r
        <h1>Index of /media/</h1><hr><pre><a href="../">../</a>\r
        <a href="Season%201/">Season 1/</a>                                          30-Nov-2026 01:00       -\r
        <a href="caf%C3%A9.mkv">café.mkv</a>                                         30-Nov-2026 01:00    1234\r
        <a href="film%20one.mp4">film one.mp4</a>                                    30-Nov-2026 01:00  123456\r
        <a href="a%26b.mp3">a&amp;b.mp3</a>                                          30-Nov-2026 01:00      12\r
        <a href="very-long-name-truncated-by-nginx-in-the-text.mkv">very-long-name-truncated-by-ng..&gt;</a> 30-Nov-2026 01:00 1\r
        </pre><hr></body>\r
        </html>\r
        """

    func testParse_nginxAutoindex_givesFilesAndSubdirectoriesWithoutTheParent() {
        let entries = HTMLIndex.parse(html: nginxAutoindex, base: base)
        XCTAssertEqual(entries, [
            .init(name: "Season 1", url: "http://files.example/media/Season%201/", isDirectory: true),
            .init(name: "café.mkv", url: "http://files.example/media/caf%C3%A9.mkv", isDirectory: false, length: 1234),
            .init(name: "film one.mp4", url: "http://files.example/media/film%20one.mp4", isDirectory: false,
                  length: 123_456),
            .init(name: "a&b.mp3", url: "http://files.example/media/a%26b.mp3", isDirectory: false, length: 12),
            .init(name: "very-long-name-truncated-by-nginx-in-the-text.mkv",
                  url: "http://files.example/media/very-long-name-truncated-by-nginx-in-the-text.mkv",
                  isDirectory: false, length: 1),
        ])
    }

    func testList_nginxAutoindex_givesItsFilesLengthsAndNoValidator() throws {
        let page = nginxAutoindex
        let sources = try HTMLIndex(url: base).list(in: ListingContext(clock: .system, fetchText: { _ in page }))
        XCTAssertEqual(sources.map(\.listedInfo), [nil, ContentInfo(length: 1234), ContentInfo(length: 123_456),
                                                   ContentInfo(length: 12), ContentInfo(length: 1)])
    }

    /// Only nginx's row shape gives a length: its date, then digits ending
    /// the line. Anything else leaves the file to be probed.
    func testParse_aLengthIsTakenOnlyFromAnNginxRow() {
        func length(_ row: String) -> Int64?? {
            HTMLIndex.parse(html: "<pre>" + row + "\r\n</pre>", base: base).first.map(\.length)
        }
        XCTAssertEqual(length(#"<a href="x.mkv">x.mkv</a>   05-Dec-2026 17:34      0"#), .some(0))
        XCTAssertEqual(length(#"<a href="x.mkv">x.mkv</a> 05-Dec-2026 17:34 4611686018427387904"#), .some(nil),
                       "19 digits")
        XCTAssertEqual(length(#"<a href="x.mkv">x.mkv</a> 05-Dec-2026 17:34 461168601842738790"#),
                       .some(461_168_601_842_738_790))
        XCTAssertEqual(length(#"<a href="x.mkv">x.mkv</a> 05-Dec-2026 17:34 99999999999999999999999"#), .some(nil),
                       "would overflow")
        XCTAssertEqual(length(#"<a href="x.mkv">x.mkv</a> 05-Dec-2026 17:34  59M"#), .some(nil), "not exact")
        XCTAssertEqual(length(#"<a href="x.mkv">x.mkv</a> 05-Dec-2026 17:34  1.2"#), .some(nil))
        XCTAssertEqual(length(#"<a href="x.mkv">x.mkv</a> 2026-12-05 17:34  1234"#), .some(nil), "Apache's date")
        XCTAssertEqual(length(#"<a href="x.mkv">x.mkv</a> 05-Dec-2026 17:34"#), .some(nil), "no length")
        XCTAssertEqual(length(#"<a href="x.mkv">x.mkv</a> 05-Dec-2026 17:34 12 bytes"#), .some(nil))
        XCTAssertEqual(length(#"<a href="x.mkv">x.mkv</a> 05-Dec-2026 17:34 -12"#), .some(nil))
        XCTAssertEqual(length(#"<a href="x.mkv"><b>x.mkv</b></a> 05-Dec-2026 17:34 12"#), .some(nil))
        XCTAssertEqual(length(#"<a href="x.mkv">x.mkv</a>"#), .some(nil))
        XCTAssertEqual(length(#"<a href="x.mkv">x.mkv</a> 05-Dec-2026 17:34 12<a href="y.mkv">y</a>"#), .some(nil))
        // A directory's row has `-`, and a directory takes no length.
        XCTAssertEqual(length(#"<a href="d/">d/</a> 05-Dec-2026 17:34 12"#), .some(nil))
        // A page cut after the digits still ends the row.
        XCTAssertEqual(HTMLIndex.parse(html: #"<a href="x.mkv">x.mkv</a> 05-Dec-2026 17:34 12"#, base: base)
            .first?.length, 12)
    }

    private let apacheIndex = """
        <!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 3.2 Final//EN">
        <html>
         <head>
          <title>Index of /media</title>
         </head>
         <body>
        <h1>Index of /media</h1>
          <table>
           <tr><th valign="top"><img src="/icons/blank.gif" alt="[ICO]"></th><th><a href="?C=N;O=D">Name</a></th><th><a href="?C=M;O=A">Last modified</a></th><th><a href="?C=S;O=A">Size</a></th><th><a href="?C=D;O=A">Description</a></th></tr>
           <tr><th colspan="5"><hr></th></tr>
        <tr><td valign="top"><img src="/icons/back.gif" alt="[PARENTDIR]"></td><td><a href="/">Parent Directory</a></td><td>&nbsp;</td><td align="right">  - </td><td>&nbsp;</td></tr>
        <tr><td valign="top"><img src="/icons/folder.gif" alt="[DIR]"></td><td><a href="extras/">extras/</a></td><td align="right">2026-11-30 01:00  </td><td align="right">  - </td><td>&nbsp;</td></tr>
        <tr><td valign="top"><img src="/icons/movie.gif" alt="[VID]"></td><td><a href="movie.mkv">movie.mkv</a></td><td align="right">2026-11-30 01:00  </td><td align="right">1.2G</td><td>&nbsp;</td></tr>
        <tr><td valign="top"><img src="/icons/sound2.gif" alt="[SND]"></td><td><A HREF='Song%27s.mp3'>Song's.mp3</A></td><td align="right">2026-11-30 01:00  </td><td align="right">3.1M</td><td>&nbsp;</td></tr>
           <tr><th colspan="5"><hr></th></tr>
        </table>
        <address>Apache/2.4.57 (Debian) Server at files.example Port 80</address>
        </body></html>
        """

    func testParse_apacheIndex_skipsSortLinksAndParentDirectory() {
        let entries = HTMLIndex.parse(html: apacheIndex, base: base)
        XCTAssertEqual(entries, [
            .init(name: "extras", url: "http://files.example/media/extras/", isDirectory: true),
            .init(name: "movie.mkv", url: "http://files.example/media/movie.mkv", isDirectory: false),
            .init(name: "Song's.mp3", url: "http://files.example/media/Song%27s.mp3", isDirectory: false),
        ])
    }

    func testParse_apacheIndexAtABaseWithoutTrailingSlashInItsTitle_stillUsesTheBaseUrl() {
        let entries = HTMLIndex.parse(html: apacheIndex, base: "http://files.example:8080/media/")
        XCTAssertEqual(entries.map(\.url), ["http://files.example:8080/media/extras/",
                                            "http://files.example:8080/media/movie.mkv",
                                            "http://files.example:8080/media/Song%27s.mp3"])
    }

    private let pythonHttpServer = """
        <!DOCTYPE HTML>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <title>Directory listing for /media/</title>
        </head>
        <body>
        <h1>Directory listing for /media/</h1>
        <hr>
        <ul>
        <li><a href="clips/">clips/</a></li>
        <li><a href="link-to-elsewhere%40/">link-to-elsewhere@/</a></li>
        <li><a href="One%20Film.mp4">One Film.mp4</a></li>
        <li><a href="two%26three.bin">two&amp;three.bin</a></li>
        <li><a href="%E6%98%A0%E7%94%BB.mkv">映画.mkv</a></li>
        </ul>
        <hr>
        </body>
        </html>
        """

    func testParse_pythonHttpServer_decodesPercentEncodingIntoNames() {
        let entries = HTMLIndex.parse(html: pythonHttpServer, base: base)
        XCTAssertEqual(names(entries), ["clips", "link-to-elsewhere@", "One Film.mp4", "two&three.bin", "映画.mkv"])
        XCTAssertEqual(entries.map(\.isDirectory), [true, true, false, false, false])
        XCTAssertEqual(entries[4].url, "http://files.example/media/%E6%98%A0%E7%94%BB.mkv")
    }

    // MARK: Links that are not entries

    func testParse_onlyLinksBelowTheBaseCount() {
        let html = """
            <a href="../">up</a>
            <a href="..">up too</a>
            <a href="../other/x.mp4">sibling</a>
            <a href="/">root</a>
            <a href="/elsewhere/y.mp4">absolute path elsewhere</a>
            <a href="http://evil.example/media/z.mp4">other host</a>
            <a href="https://files.example/media/tls.mp4">other scheme</a>
            <a href="http://files.example:81/media/port.mp4">other port</a>
            <a href="//evil.example/media/p.mp4">protocol-relative</a>
            <a href="?C=N;O=D">sort</a>
            <a href="?C=M;O=A">sort</a>
            <a href="#top">fragment</a>
            <a href="./">self</a>
            <a href=".">self too</a>
            <a href="mailto:x@files.example">mail</a>
            <a href="javascript:alert(1)">script</a>
            <a href="deep/er/file.mp4">grandchild</a>
            <a href="ok.mp4?download=1">query</a>
            <a href="http://files.example/media/absolute.mp4">absolute same dir</a>
            <a href="/media/rooted.mp4">rooted same dir</a>
            <a href="./dot.mp4">dot slash</a>
            <a href="kept.mp4#t=10">fragment</a>
            """
        let entries = HTMLIndex.parse(html: html, base: base)
        XCTAssertEqual(names(entries), ["absolute.mp4", "rooted.mp4", "dot.mp4", "kept.mp4"])
        XCTAssertEqual(entries.map(\.url), ["http://files.example/media/absolute.mp4",
                                            "http://files.example/media/rooted.mp4",
                                            "http://files.example/media/dot.mp4",
                                            "http://files.example/media/kept.mp4"])
    }

    func testParse_encodedParentAndEncodedSlash_neverEscapeTheBase() {
        let html = """
            <a href="%2E%2E/">encoded parent</a>
            <a href="%2e%2e">encoded parent file</a>
            <a href="..%2Fescape.mp4">encoded slash</a>
            <a href="%2E/">encoded self</a>
            """
        let entries = HTMLIndex.parse(html: html, base: base)
        for entry in entries {
            XCTAssertNotEqual(entry.name, "..")
            XCTAssertNotEqual(entry.name, ".")
            XCTAssertTrue(entry.url.hasPrefix(base), entry.url)
            let safe = FileNaming.safe(entry.name)
            XCTAssertFalse(safe.contains("/"), safe)
            XCTAssertFalse(safe == "." || safe == "..", safe)
        }
        XCTAssertEqual(entries.map { FileNaming.safe($0.name) }, [".._escape.mp4"])
    }

    func testParse_duplicateLinks_giveOneEntry() {
        let html = #"<a href="a.mp4">a.mp4</a> <a href="a.mp4"><img src="i.gif"></a> <a href="./a.mp4">again</a>"#
        XCTAssertEqual(names(HTMLIndex.parse(html: html, base: base)), ["a.mp4"])
    }

    // MARK: Hostile names

    func testParse_nulByte_isKeptForFileNamingToReplace() {
        let entries = HTMLIndex.parse(html: #"<a href="nul%00.mp4">x</a>"#, base: base)
        XCTAssertEqual(entries.count, 1)
        XCTAssertEqual(entries.first.map { FileNaming.safe($0.name) }, "nul_.mp4")
        XCTAssertEqual(entries.first?.url, "http://files.example/media/nul%00.mp4")
    }

    func testParse_invalidUtf8PercentEncoding_keepsTheEncodedTextAndUrl() {
        let entries = HTMLIndex.parse(html: #"<a href="bad%FF.mp4">x</a>"#, base: base)
        XCTAssertEqual(entries.count, 1)
        let name = entries.first?.name ?? ""
        XCTAssertFalse(name.isEmpty)
        XCTAssertFalse(FileNaming.safe(name).contains("/"))
        XCTAssertEqual(entries.first?.url, "http://files.example/media/bad%FF.mp4")
    }

    func testParse_veryLongName_isCutToNameMaxByFileNaming() {
        let long = String(repeating: "é", count: 300) + ".mkv"
        let encoded = long.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed)!
        let entries = HTMLIndex.parse(html: "<a href=\"\(encoded)\">x</a>", base: base)
        XCTAssertEqual(entries.first?.name, long)
        let safe = FileNaming.safe(long)
        XCTAssertLessThanOrEqual(safe.utf8.count, 255)
        XCTAssertTrue(long.hasPrefix(safe))
    }

    func testParse_namesThatCollideOnceSafe_areMadeUniqueByFileNaming() {
        let html = #"<a href="x%2Fy.mp4">1</a><a href="x_y.mp4">2</a><a href="x%01y.mp4">3</a>"#
        let entries = HTMLIndex.parse(html: html, base: base)
        var naming = Claims()
        XCTAssertEqual(entries.map { naming.claim(FileNaming.safe($0.name)) },
                       ["x_y.mp4", "x_y (2).mp4", "x_y (3).mp4"])
    }

    func testParse_controlCharactersAndEntitiesInHref() {
        let html = #"<a href="tab%09name.mp4">t</a><a href="q&quot;uote.mp4">q</a><a href='lt&lt;gt&gt;.mp4'>l</a>"#
        let safe = HTMLIndex.parse(html: html, base: base).map { FileNaming.safe($0.name) }
        XCTAssertEqual(safe, ["tab_name.mp4", "q\"uote.mp4", "lt<gt>.mp4"])
    }

    // MARK: HTML shapes

    func testParse_unquotedAndSpacedAndUppercaseHrefs() {
        let html = "<A HREF=one.mp4>1</A><a  class=\"x\"  href = \"two.mp4\" >2</a><a href='three.mp4'>3</a>"
        XCTAssertEqual(names(HTMLIndex.parse(html: html, base: base)), ["one.mp4", "two.mp4", "three.mp4"])
    }

    func testParse_hrefsOfOtherTagsStartingWithA_areNotLinks() {
        let html = #"<abbr href="abbr.mp4">x</abbr><area href="area.mp4"><address href="addr.mp4"><a href="real.mp4">r</a>"#
        XCTAssertEqual(names(HTMLIndex.parse(html: html, base: base)), ["real.mp4"])
    }

    func testParse_pageWithoutLinks_givesNoEntries() {
        XCTAssertEqual(HTMLIndex.parse(html: "<html><body>Forbidden</body></html>", base: base), [])
        XCTAssertEqual(HTMLIndex.parse(html: "", base: base), [])
        XCTAssertEqual(HTMLIndex.parse(html: "<a href=\"unterminated", base: base).count, 0)
    }

    func testParse_baseWithEncodedCharacters_matchesLinksBelowIt() {
        let html = #"<a href="../">up</a><a href="ep%201.mkv">ep 1</a><a href="/my%20films/ep%202.mkv">ep 2</a>"#
        let entries = HTMLIndex.parse(html: html, base: "http://files.example/my%20films/")
        XCTAssertEqual(names(entries), ["ep 1.mkv", "ep 2.mkv"])
    }

    func testParse_aPageOf100000Links_givesEveryEntryInOrder() {
        // A music library's directory: the scan must stay linear in the page.
        var html = "<html><body><h1>Index of /media/</h1><hr><pre><a href=\"../\">../</a>\r\n"
        for i in 0..<100_000 {
            html += "<a href=\"t%20\(i).mp3\">t \(i).mp3</a>                30-Nov-2026 01:00    \(i)\r\n"
        }
        html += "</pre><hr></body></html>"
        let entries = HTMLIndex.parse(html: html, base: base)
        XCTAssertEqual(entries.count, 100_000)
        XCTAssertEqual(entries.first, .init(name: "t 0.mp3", url: "http://files.example/media/t%200.mp3", isDirectory: false,
                                             length: 0))
        XCTAssertEqual(entries.last?.name, "t 99999.mp3")
        XCTAssertEqual(entries.last?.length, 99_999)
    }

    func testPlainHrefs_giveWhatURLResolutionGives() {
        // Plain relative hrefs skip URL parsing; they must give what it gives.
        let resolver = HTMLIndex.Resolver(base: base)!
        let plain = ["a.mp4", "b%20c.mkv", "d/", "caf%C3%A9.mp3", "j;k.mp4", "l=m&n.mp4", "o'p.mp4", "q%2Fr.mp4",
                     "s~t_u-v.mp4", "w+x.mp4", "y@z.mp4", "(1)!$*,.flac", "%2E%2E%2Fx"]
        for href in plain {
            XCTAssertNotNil(resolver.plainEntry(href), href)
            XCTAssertEqual(resolver.plainEntry(href), resolver.resolvedEntry(href), href)
        }
        let notPlain = ["./e.mp4", "f?x=1", "g#frag", "..", ".", "%2E%2E", "%2e", "h:i.mp4", "a/b.mp4", "/abs.mp4",
                        "sp ace.mp4", "caf\u{e9}.mp3", "bad%G1.mp4", "cut%2", "", "//host/x", "http://files.example/media/a"]
        for href in notPlain { XCTAssertNil(resolver.plainEntry(href), href) }
        XCTAssertNil(HTMLIndex.Resolver(base: "http://files.example/media/?sort=1")!.plainEntry("a.mp4"))
    }

    func testParse_baseWithCredentials_keepsThemOnEntryUrls() {
        let entries = HTMLIndex.parse(html: #"<a href="a.mp4">a</a>"#, base: "http://u:p@files.example/media/")
        XCTAssertEqual(entries.map(\.name), ["a.mp4"])
        XCTAssertEqual(entries.first.map { MediaError.redacted($0.url).contains("p@") }, false)
    }
}
