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

final class SourceTests: XCTestCase {
    private var base = ""

    override func setUpWithError() throws {
        base = try TemporaryDirectory.make("source")
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: base)
    }

    private func listFile(_ text: String, name: String = "list.txt") -> String {
        let path = "\(base)/\(name)"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(text.utf8)))
        return path
    }

    private func assertRejected(_ arguments: [String], mentioning parts: [String],
                                file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try Source.parse(arguments: arguments, clock: .system), file: file, line: line) { error in
            XCTAssertEqual((error as? MediaError)?.errno, EINVAL, file: file, line: line)
            for part in parts {
                XCTAssertTrue("\(error)".contains(part), "'\(error)' lacks '\(part)'", file: file, line: line)
            }
        }
    }

    // MARK: URL arguments

    func testParse_urls_namesThemAfterTheirLastPathComponentInOrder() throws {
        let sources = try Source.parse(arguments: ["https://a.example/films/b.mkv", "http://c.example/x/a.mp4?token=1"], clock: .system)
        XCTAssertEqual(sources, [Source(name: "b.mkv", url: "https://a.example/films/b.mkv"),
                                 Source(name: "a.mp4", url: "http://c.example/x/a.mp4?token=1")])
    }

    func testParse_unsupportedScheme_namesSchemeAndArgument() {
        assertRejected(["gopher://host.example/a.mp4"], mentioning: ["unsupported scheme 'gopher'",
                                                                    "gopher://host.example/a.mp4"])
    }

    func testParse_urlWithoutHost_isRejected() {
        assertRejected(["http:///a.mp4"], mentioning: ["no host", "http:///a.mp4"])
    }

    func testParse_malformedUrl_isRejected() {
        assertRejected(["http://bad host/a b.mp4"], mentioning: ["malformed URL"])
    }

    // URLs a user may paste that Foundation takes but means something
    // else to libcurl or the server: refused, naming the URL and why.
    func testParse_urlWithAFragment_isRefusedSayingSo() {
        assertRejected(["http://host.example/film.mkv#t=10"], mentioning: ["#fragment", "http://host.example/film.mkv#t=10"])
    }

    func testParse_urlWithTwoAtSignsInItsAuthority_isRefused() {
        assertRejected(["http://user@mail@host.example/a.mp4"], mentioning: ["more than one '@'"])
        assertRejected(["http://u:p@ss@host.example/a.mp4"], mentioning: ["more than one '@'"])
        // One '@', and an encoded one in the user name: fine.
        XCTAssertNoThrow(try Source.parse(arguments: ["http://user%40mail:pw@host.example/a.mp4"], clock: .system))
        XCTAssertNoThrow(try Source.parse(arguments: ["http://host.example/a@b.mp4"], clock: .system))
    }

    func testParse_urlWithASpaceOrABackslash_isRefused() {
        assertRejected(["http://host.example/a b.mp4"], mentioning: ["a space", "%20"])
        assertRejected(["http://host.example/a\\b.mp4"], mentioning: ["backslash"])
    }

    func testParse_missingListFile_saysNeitherUrlNorListFile() {
        assertRejected(["\(base)/nope.txt"], mentioning: ["\(base)/nope.txt", "no such file"])
    }

    func testParse_directoryAsListFile_saysItIsADirectory() {
        assertRejected([base], mentioning: ["is a directory"])
    }

    // MARK: The mount root

    func testIsMountRoot_oneDirectoryURL_isTheRoot_anythingElseAName() throws {
        for url in ["https://a.example/films/", "dav://nas.example/lib/", "davs://nas.example/lib/"] {
            XCTAssertTrue(Source.isMountRoot(arguments: [url], parsed: try Source.parse(arguments: [url], clock: .system)), url)
        }
        let s3 = Source(name: "media", url: "s3://media/", kind: .directory(HTMLIndex(url: "https://x.example/")))
        XCTAssertTrue(Source.isMountRoot(arguments: ["s3://media/"], parsed: [s3]))
        let two = ["https://a.example/films/", "https://a.example/shows/"]
        XCTAssertFalse(Source.isMountRoot(arguments: two, parsed: try Source.parse(arguments: two, clock: .system)))
        let file = ["https://a.example/a.mp4"]
        XCTAssertFalse(Source.isMountRoot(arguments: file, parsed: try Source.parse(arguments: file, clock: .system)))
        let list = [listFile("https://a.example/films/\n")]
        XCTAssertFalse(Source.isMountRoot(arguments: list, parsed: try Source.parse(arguments: list, clock: .system)),
                       "a list file names its sources, even one directory")
    }

    // MARK: List files

    func testParse_listFile_skipsCommentsAndBlankLinesAndTakesTabNames() throws {
        let path = listFile("""
            # films
            https://a.example/one.mp4

              # indented comment
            Second Film.mkv\thttps://a.example/2.mkv
            \t
            https://a.example/dir/three.webm\u{20}\u{20}

            """)
        XCTAssertEqual(try Source.parse(arguments: [path], clock: .system), [
            Source(name: "one.mp4", url: "https://a.example/one.mp4"),
            Source(name: "Second Film.mkv", url: "https://a.example/2.mkv"),
            Source(name: "three.webm", url: "https://a.example/dir/three.webm"),
        ])
    }

    func testParse_listFileBadUrl_namesFileAndLine() {
        let path = listFile("# header\nhttps://a.example/ok.mp4\n\ngopher://a.example/bad.mp4\n")
        assertRejected([path], mentioning: ["\(path):4", "unsupported scheme 'gopher'"])
    }

    func testParse_listLineStartingWithTab_isRejectedAsAnEmptyName() {
        let path = listFile("https://a.example/ok.mp4\n\thttps://a.example/b.mp4\n")
        assertRejected([path], mentioning: ["\(path):2", "empty name before the tab"])
    }

    func testParse_listFileWithWindowsLineEndings_readsEveryLine() throws {
        // "\r\n" is one Character in Swift, so splitting on "\n" must not miss it.
        let path = listFile("# list\r\nhttps://a.example/one.mp4\r\nhttps://a.example/two.mp4\r\n")
        XCTAssertEqual(try Source.parse(arguments: [path], clock: .system).map(\.url),
                       ["https://a.example/one.mp4", "https://a.example/two.mp4"])
    }

    func testParse_listFileNotUtf8_isRejected() {
        let path = "\(base)/binary"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data([0xff, 0xfe, 0x00, 0xc3])))
        assertRejected([path], mentioning: ["not UTF-8"])
    }

    func testParse_duplicateNamesAcrossArgumentsAndLists_keepsThemForTheCatalogToNumber() throws {
        let path = listFile("https://b.example/a.mp4\na.mp4\thttps://c.example/z\n")
        let sources = try Source.parse(arguments: ["https://a.example/a.mp4", path], clock: .system)
        XCTAssertEqual(sources.map(\.name), ["a.mp4", "a.mp4", "a.mp4"])
    }

    func testParse_tabName_isMadeSafe() throws {
        let path = listFile("../evil/name\thttps://a.example/x.mp4\n")
        XCTAssertEqual(try Source.parse(arguments: [path], clock: .system).map(\.name), [".._evil_name"])
    }

    // MARK: FileNaming

    func testNameForURL_percentDecodesTheLastComponent() {
        XCTAssertEqual(FileNaming.name(forURL: "https://a.example/dir/My%20Film%20%C3%A9.mp4"), "My Film é.mp4")
    }

    func testNameForURL_encodedSlashAndNul_areReplaced() {
        XCTAssertEqual(FileNaming.name(forURL: "https://a.example/a%2Fb%00c.mp4"), "a_b_c.mp4")
    }

    func testNameForURL_withoutPath_usesTheHost() {
        XCTAssertEqual(FileNaming.name(forURL: "https://media.example"), "media.example")
        XCTAssertEqual(FileNaming.name(forURL: "https://media.example/"), "media.example")
    }

    func testNameForURL_trailingSlash_usesTheLastDirectory() {
        XCTAssertEqual(FileNaming.name(forURL: "https://a.example/films/"), "films")
    }

    func testNameForURL_dotComponents_areNeverDotOrDotDot() {
        XCTAssertEqual(FileNaming.name(forURL: "https://a.example/a/%2E%2E"), "_..")
        XCTAssertEqual(FileNaming.name(forURL: "https://a.example/a/%2E"), "_.")
    }

    func testSafe_replacesSlashControlCharactersAndDelete() {
        XCTAssertEqual(FileNaming.safe("a/b\u{0}c\u{1}d\te\nf\u{7f}g"), "a_b_c_d_e_f_g")
        XCTAssertEqual(FileNaming.safe(""), "_")
        XCTAssertEqual(FileNaming.safe("."), "_.")
        XCTAssertEqual(FileNaming.safe(".."), "_..")
        XCTAssertEqual(FileNaming.safe("...mp4"), "...mp4")
    }

    func testSafe_longName_isCutTo255BytesOnACharacterBoundary() {
        let name = FileNaming.safe(String(repeating: "é", count: 200))
        XCTAssertLessThanOrEqual(name.utf8.count, 255)
        XCTAssertEqual(name, String(repeating: "é", count: 127))
        XCTAssertEqual(FileNaming.safe(String(repeating: "x", count: 300)), String(repeating: "x", count: 255))
    }

    func testClaim_duplicates_getNumberBeforeTheExtension() {
        var naming = Claims()
        XCTAssertEqual(["a.mp4", "a.mp4", "a.mp4", "a", "a", ".hidden", ".hidden", "a.b.mkv", "a.b.mkv"]
                        .map { naming.claim($0) },
                       ["a.mp4", "a (2).mp4", "a (3).mp4", "a", "a (2)", ".hidden", ".hidden (2)",
                        "a.b.mkv", "a.b (2).mkv"])
    }

    func testClaim_duplicateOfMaxLengthNameWithExtension_staysWithinNameMax() {
        var naming = Claims()
        let name = String(repeating: "x", count: 251) + ".mp4"
        XCTAssertEqual(naming.claim(name), name)
        let second = naming.claim(name)
        XCTAssertNotEqual(second, name)
        XCTAssertLessThanOrEqual(second.utf8.count, 255, "'\(second)' is \(second.utf8.count) bytes")
        XCTAssertTrue(second.hasSuffix(".mp4"))
    }

    func testClaim_duplicateOfMaxLengthNameWithoutExtension_returnsAUniqueName() {
        let name = String(repeating: "y", count: 255)
        let claimed = Background { () -> [String] in
            var naming = Claims()
            return [naming.claim(name), naming.claim(name)]
        }
        guard let names = try? claimed.result(timeout: 5) else {
            return XCTFail("claim did not return within 5 s (the numbered name is cut back to the taken one)")
        }
        XCTAssertEqual(names.first, name)
        XCTAssertNotEqual(names.last, name)
        XCTAssertLessThanOrEqual(names.last?.utf8.count ?? 0, 255)
    }
}

/// FileNaming with the names it returned taken, as a directory's children are.
struct Claims {
    private var naming = FileNaming()
    private var taken = Set<String>()

    mutating func claim(_ name: String) -> String {
        let taken = self.taken
        let unique = naming.claim(name) { taken.contains($0) }
        self.taken.insert(unique)
        return unique
    }
}
