// ArchivePath: member names that could leave their folder or name nothing
// are refused, with "/" or "\" as the separator; RAR4's backslashes become
// slashes.
import XCTest
@testable import MediaSources
@testable import MediaStore
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport

final class ArchivePathTests: XCTestCase {
    func testNamesThatEscapeOrNameNothing_areRefusedAsUnsafe() {
        for name in ["", "/etc/passwd", "../up", "a/../../b", "a//b", "a/", "./a", "a/.", "c:/windows", "d\\..\\e",
                     "x\u{0}y", "\\\\server\\share"] {
            XCTAssertThrowsError(try ArchivePath.checked(name, backslashIsSeparator: false), name) { error in
                XCTAssertEqual(error as? ArchiveRefusal, .unsafePath(name))
            }
        }
    }

    func testPlainNames_areKept_andRAR4BackslashesBecomeSlashes() throws {
        XCTAssertEqual(try ArchivePath.checked("film/a..b.mkv", backslashIsSeparator: false), "film/a..b.mkv")
        XCTAssertEqual(try ArchivePath.checked("é/ü.txt", backslashIsSeparator: false), "é/ü.txt")
        XCTAssertEqual(try ArchivePath.checked("vols\\bigfile.txt", backslashIsSeparator: true), "vols/bigfile.txt")
        XCTAssertEqual(try ArchivePath.checked("a\\b", backslashIsSeparator: false), "a\\b")
    }
}
