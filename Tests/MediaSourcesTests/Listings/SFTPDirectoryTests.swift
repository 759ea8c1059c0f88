import Foundation
import XCTest
@testable import MediaSources
@testable import MediaStore
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport

/// An SFTP directory's entries as sources, and `sftp://` arguments; the
/// listing itself runs against a real sshd (integration/test_sftp.py).
final class SFTPDirectoryTests: XCTestCase {
    private let directory = SFTPDirectory(url: "sftp://alice@box.example:2222/srv/media/")

    private func entry(_ name: String, directory: Bool = false, regular: Bool = true, size: Int64? = 10,
                       mtime: Int64? = 1_700_000_000) -> SFTPSession.Entry {
        SFTPSession.Entry(name: name, isDirectory: directory, isRegular: regular && !directory, isLink: false,
                          size: size, mtime: mtime)
    }

    func testEntries_becomeFilesWithTheListedSizeAndDate_andDirectoriesOfTheSameKind() {
        let sources = directory.sources(of: [entry("film.mkv", size: 1234), entry("Season 1", directory: true)])
        XCTAssertEqual(sources.map(\.name), ["film.mkv", "Season 1"])
        XCTAssertEqual(sources[0].url, "sftp://alice@box.example:2222/srv/media/film.mkv")
        XCTAssertEqual(sources[0].listedInfo, ContentInfo(length: 1234, lastModified: "Tue, 14 Nov 2023 22:13:20 GMT",
                                                          acceptsRanges: true))
        XCTAssertEqual(sources[1].url, "sftp://alice@box.example:2222/srv/media/Season%201/")
        XCTAssertTrue(sources[1].listing is SFTPDirectory)
        XCTAssertTrue(sources[1].isDirectory)
    }

    func testEntriesThatAreNeitherFilesNorDirectories_orHaveNoSize_areLeftOut() {
        let sources = directory.sources(of: [entry("socket", regular: false), entry("nosize.bin", size: nil),
                                             entry("ok.bin")])
        XCTAssertEqual(sources.map(\.name), ["ok.bin"])
    }

    func testTheMountsListing_isTheFirstListOnly_andOnlyWithinItsLife() throws {
        let time = TestClock()
        let context = ListingContext(clock: time.clock, fetchText: { _ in throw MediaError.io("no network") })
        let url = "sftp://alice@127.0.0.1:1/srv/media/"
        func listed(_ age: Double) -> SFTPDirectory {
            SFTPDirectory(url: url, first: FirstListing([entry("film.mkv", size: 7)], at: time.clock.monotonic() - age))
        }
        let fresh = listed(0)
        XCTAssertEqual(try fresh.list(in: context).map(\.name), ["film.mkv"])
        // Taken: the next list asks the server (here refused: nothing
        // listens on port 1).
        XCTAssertThrowsError(try fresh.list(in: context))
        XCTAssertThrowsError(try listed(FirstListing.life + 1).list(in: context), "too old: listed again")
    }

    func testNames_areEscapedInURLs_allButTheUnreservedCharacters() {
        XCTAssertEqual(SFTPDirectory.encoded("a b#c%d?é~._-"), "a%20b%23c%25d%3F%C3%A9~._-")
    }

    func testAnSFTPURL_endingInASlash_isADirectory_andAnyOtherAFile() {
        let root = Source.at(url: "sftp://box.example/srv/media/")
        XCTAssertTrue(root.listing is SFTPDirectory)
        let file = Source.at(url: "sftp://box.example/srv/media/my%20film.mkv")
        XCTAssertFalse(file.isDirectory)
        XCTAssertEqual(file.name, "my film.mkv")
    }

    func testValidate_acceptsSFTP_andStillRefusesAnUnknownScheme_namingTheSchemes() throws {
        XCTAssertNoThrow(try Source.validate(url: "sftp://u@box.example:22/x/", origin: "source"))
        XCTAssertThrowsError(try Source.validate(url: "gopher://box.example/x/", origin: "source")) { error in
            XCTAssertTrue("\(error)".contains("sftp"), "\(error)")
        }
    }
}
