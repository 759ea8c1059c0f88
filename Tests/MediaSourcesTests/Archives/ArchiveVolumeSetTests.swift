// RARVolumeSet: a directory's names grouped into volume sets, each with
// its first volume and its folder's name, whatever the width of the part
// numbers; the other names left out.
import XCTest
@testable import MediaSources
@testable import MediaStore
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport

final class ArchiveVolumeSetTests: XCTestCase {
    func testPartNamesOfAnyWidth_formOneSet_namedWithoutThePart() {
        let sets = RARVolumeSet.group(["film.part10.rar", "film.part09.rar", "film.part01.rar", "film.nfo",
                                       "show.part1.rar", "show.part2.rar", "other.part001.RAR"])
        XCTAssertEqual(sets, [
            RARVolumeSet(folder: "film", first: "film.part01.rar", names: ["film.part01.rar", "film.part09.rar", "film.part10.rar"]),
            RARVolumeSet(folder: "other", first: "other.part001.RAR", names: ["other.part001.RAR"]),
            RARVolumeSet(folder: "show", first: "show.part1.rar", names: ["show.part1.rar", "show.part2.rar"]),
        ])
    }

    func testAnOldStyleSet_startsAtTheRar_thenR00Onwards() {
        let sets = RARVolumeSet.group(["a.r01", "a.rar", "a.r00", "b.r00", "a.r100"])
        XCTAssertEqual(sets, [RARVolumeSet(folder: "a", first: "a.rar", names: ["a.rar", "a.r00", "a.r01", "a.r100"])])
    }

    func testALoneRar_isASetOfOne_andNamesThatOnlyLookNumbered_areNot() {
        XCTAssertEqual(RARVolumeSet.group(["single.rar", ".rar", "x.part.rar", "x.r0", "notes.txt"]),
                       [RARVolumeSet(folder: "single", first: "single.rar", names: ["single.rar"]),
                        RARVolumeSet(folder: "x.part", first: "x.part.rar", names: ["x.part.rar"])])
    }

    func testANumbering_namesItsSiblings_inTheNamesOwnWidthAndCase() {
        let part = RARVolumeSet.numbering(of: "Film.PART07.RAR")
        XCTAssertEqual(part?.base, "Film")
        XCTAssertEqual(part?.number, 7)
        XCTAssertEqual(part.map { [$0.first, $0.width] }, [1, 2])
        XCTAssertEqual(part.map { [1, 9, 10, 123].map($0.name(number:)) },
                       ["Film.PART01.RAR", "Film.PART09.RAR", "Film.PART10.RAR", "Film.PART123.RAR"])
        let old = RARVolumeSet.numbering(of: "show.rar")
        XCTAssertEqual(old.map { [-1, 0, 1, 100].map($0.name(number:)) }, ["show.rar", "show.r00", "show.r01", "show.r100"])
        XCTAssertEqual(RARVolumeSet.numbering(of: "show.r05")?.number, 5)
        XCTAssertEqual(RARVolumeSet.numbering(of: "show.r05")?.name(number: -1), "show.rar")
        XCTAssertNil(RARVolumeSet.numbering(of: "notes.txt"))
        XCTAssertNil(RARVolumeSet.numbering(of: "x.r0"))
    }

    func testAnArchiveURL_isADirectoryNamedAfterItsSet_andOtherURLsAreNot() {
        let rar = Source.at(url: "http://h/a%20b/Film.part1.rar")
        XCTAssertEqual(rar.name, "Film")
        XCTAssertEqual((rar.listing as? ArchiveSource)?.format, .rar)
        let zip = Source.at(url: "davs://h/dir/Show%20One.zip")
        XCTAssertEqual(zip.name, "Show One")
        XCTAssertEqual(zip.url, "https://h/dir/Show%20One.zip")
        XCTAssertNotNil(Source.at(url: "http://h/x.r00").listing as? ArchiveSource)
        XCTAssertFalse(Source.at(url: "http://h/film.mkv").isDirectory)
        XCTAssertNil(Source.at(url: "http://h/zips/").listing as? ArchiveSource)
        XCTAssertNil(Source.at(url: "dav://h/lib").listing as? ArchiveSource)
    }

    func testMayNameAnArchive_looksAtTheEndOnly_caseAside() {
        for name in ["a.zip", "A.ZIP", "f.part01.rar", "f.RAR", "f.r00", "f.R123", ".rar"] {
            XCTAssertTrue(RARVolumeSet.mayNameAnArchive(name), name)
        }
        for name in ["film.mkv", "zip", "a.zipx", "f.r0", "f.r", "f.rx1", "f.r1234567890", "rar", "f.zip.txt"] {
            XCTAssertFalse(RARVolumeSet.mayNameAnArchive(name), name)
        }
    }
}
