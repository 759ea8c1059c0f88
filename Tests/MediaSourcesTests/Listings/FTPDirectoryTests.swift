import Foundation
import XCTest
@testable import MediaSources
@testable import MediaStore
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport

/// MLSD lines and an FTP directory's entries as sources; the listing
/// itself runs against pyftpdlib (integration/test_ftp.py).
final class FTPDirectoryTests: XCTestCase {
    func testAnMLSDLine_givesTypeSizeTimeAndName_factsInAnyCase() {
        let entry = MLSDEntry(line: "Type=file;Size=1234;Modify=20231114221320;perm=r; my film.mkv\r")
        XCTAssertEqual(entry, MLSDEntry(name: "my film.mkv", kind: .file, size: 1234, modified: 1_700_000_000))
        XCTAssertEqual(MLSDEntry(line: "type=dir;modify=20231114221320.123; Season 1")?.kind, .directory)
        XCTAssertEqual(MLSDEntry(line: "type=dir;modify=20231114221320.123; Season 1")?.modified, 1_700_000_000)
        XCTAssertEqual(MLSDEntry(line: "type=OS.unix=slink:/x; link")?.kind, .other)
    }

    func testTheDirectoryItself_itsParent_andLinesThatDoNotRead_areNil() {
        XCTAssertNil(MLSDEntry(line: "type=cdir;modify=20231114221320; /srv"))
        XCTAssertNil(MLSDEntry(line: "type=pdir; .."))
        XCTAssertNil(MLSDEntry(line: "no-space-here"))
        XCTAssertNil(MLSDEntry(line: "type=file; a/b"))
        XCTAssertNil(MLSDEntry(line: Substring("type=file; " + String(repeating: "x", count: MLSDEntry.maxLine))))
    }

    func testHostileNumbers_readAsUnknown() {
        let entry = MLSDEntry(line: "type=file;size=99999999999999999999999;modify=99991399000000; x")
        XCTAssertNil(entry?.size)
        XCTAssertNil(entry?.modified)
        XCTAssertNil(MLSDEntry(line: "type=file;size=-1; y")?.size)
    }

    func testEntries_becomeFilesWithTheirSizeAndDate_directoriesOfTheSameKind_andNoSizeNoFile() {
        let directory = FTPDirectory(url: "ftp://box.example/pub/")
        let sources = directory.sources(of: MLSDEntry.entries(
            "type=cdir; /pub\r\ntype=file;size=10;modify=19700101000000; a b.bin\r\ntype=dir; Sub\r\ntype=file; nosize\r\n"))
        XCTAssertEqual(sources.map(\.name), ["a b.bin", "Sub"])
        XCTAssertEqual(sources[0].url, "ftp://box.example/pub/a%20b.bin")
        XCTAssertEqual(sources[0].listedInfo, ContentInfo(length: 10, lastModified: "Thu, 01 Jan 1970 00:00:00 GMT",
                                                          acceptsRanges: true))
        XCTAssertTrue(sources[1].listing is FTPDirectory)
        XCTAssertEqual(sources[1].url, "ftp://box.example/pub/Sub/")
    }

    func testFTPAndFTPSURLs_endingInASlash_areDirectories() throws {
        XCTAssertTrue(Source.at(url: "ftps://box.example/pub/").listing is FTPDirectory)
        XCTAssertFalse(Source.at(url: "ftp://box.example/pub/x.mkv").isDirectory)
        XCTAssertNoThrow(try Source.validate(url: "ftp://u:p@box.example:2121/pub/", origin: "source"))
    }
}
