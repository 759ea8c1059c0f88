import CCurl
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

    // MARK: LIST, for a server without MLSD

    func testAnEntryOfLibcurlsListParser_isAnMLSDLine_andDotsOrNewlinesAreNone() {
        func line(_ name: String, _ type: curlfiletype, size: Int64?, time: String? = "Dec 07 03:52") -> String? {
            name.withCString { namePointer in
                (time ?? "").withCString { timePointer in
                    var entry = curl_fileinfo()
                    entry.filename = UnsafeMutablePointer(mutating: namePointer)
                    entry.filetype = type
                    if let size {
                        entry.size = curl_off_t(size)
                        entry.flags = UInt32(CURLFINFOFLAG_KNOWN_SIZE)
                    }
                    entry.strings.time = time == nil ? nil : UnsafeMutablePointer(mutating: timePointer)
                    return FTPDirectory.mlsdLine(of: entry)
                }
            }
        }
        XCTAssertEqual(line("a b.mkv", CURLFILETYPE_FILE, size: 100_000, time: "Dec 07 03:52"),
                       "type=file;size=100000; a b.mkv\r\n", "LIST's time is no validator: none given")
        XCTAssertEqual(line("Season 1", CURLFILETYPE_DIRECTORY, size: 4096, time: "Nov 14  2023"),
                       "type=dir;size=4096; Season 1\r\n")
        XCTAssertEqual(line("link", CURLFILETYPE_SYMLINK, size: nil, time: "garbled"), "type=other; link\r\n")
        XCTAssertNil(line(".", CURLFILETYPE_DIRECTORY, size: nil, time: nil))
        XCTAssertNil(line("..", CURLFILETYPE_DIRECTORY, size: nil, time: nil))
        XCTAssertNil(line("two\nlines", CURLFILETYPE_FILE, size: 1, time: nil))
        let entries = MLSDEntry.entries(line("a b.mkv", CURLFILETYPE_FILE, size: 100_000, time: "Dec 07 03:52")!)
        XCTAssertEqual(entries, [MLSDEntry(name: "a b.mkv", kind: .file, size: 100_000, modified: nil)])
    }
}

