// RARVolumeSet: a directory's names grouped into volume sets, each with
// its first volume and its folder's name, whatever the width of the part
// numbers; the other names left out.
import XCTest
@testable import MediaCache

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
}
