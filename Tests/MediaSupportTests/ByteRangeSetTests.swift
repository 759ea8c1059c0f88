import XCTest
@testable import MediaSupport
@testable import MediaTestSupport

final class ByteRangeSetTests: XCTestCase {
    func testInsert_withOverlappingAndAdjacentRanges_coalesces() {
        let cases: [(inserts: [Range<Int64>], expected: [Range<Int64>])] = [
            ([], []),
            ([5..<5], []),
            ([0..<10], [0..<10]),
            ([0..<10, 10..<20], [0..<20]),
            ([10..<20, 0..<10], [0..<20]),
            ([0..<10, 20..<30], [0..<10, 20..<30]),
            ([20..<30, 0..<10], [0..<10, 20..<30]),
            ([0..<10, 5..<15], [0..<15]),
            ([0..<10, 20..<30, 40..<50, 5..<45], [0..<50]),
            ([0..<10, 20..<30, 40..<50, 10..<20], [0..<30, 40..<50]),
            ([0..<10, 20..<30, 12..<18], [0..<10, 12..<18, 20..<30]),
            ([0..<100, 10..<20], [0..<100]),
            ([10..<20, 0..<100], [0..<100]),
            ([0..<10, 20..<30, 30..<40, 9..<20], [0..<40]),
        ]
        for (inserts, expected) in cases {
            var set = ByteRangeSet()
            for r in inserts { set.insert(r) }
            XCTAssertEqual(set.ranges, expected, "inserting \(inserts)")
            XCTAssertEqual(ByteRangeSet(inserts).ranges, expected, "init with \(inserts)")
        }
    }

    func testRemove_withVariousOverlaps_leavesOnlyTheRest() {
        let base: [Range<Int64>] = [0..<10, 20..<30, 40..<50]
        let cases: [(removed: Range<Int64>, expected: [Range<Int64>])] = [
            (5..<5, base),
            (10..<20, base),
            (0..<10, [20..<30, 40..<50]),
            (2..<8, [0..<2, 8..<10, 20..<30, 40..<50]),
            (5..<25, [0..<5, 25..<30, 40..<50]),
            (0..<100, []),
            (30..<40, base),
            (25..<45, [0..<10, 20..<25, 45..<50]),
            (45..<60, [0..<10, 20..<30, 40..<45]),
        ]
        for (removed, expected) in cases {
            var set = ByteRangeSet(base)
            set.remove(removed)
            XCTAssertEqual(set.ranges, expected, "removing \(removed)")
        }
    }

    func testContains_forVariousRanges_answersWhetherEveryByteIsPresent() {
        let set = ByteRangeSet([0..<10, 20..<30])
        let cases: [(Range<Int64>, Bool)] = [
            (0..<0, true), (15..<15, true), (0..<10, true), (3..<7, true), (9..<10, true),
            (0..<11, false), (9..<21, false), (10..<20, false), (15..<16, false),
            (20..<30, true), (25..<31, false), (30..<31, false), (-1..<0, false),
        ]
        for (r, expected) in cases {
            XCTAssertEqual(set.contains(r), expected, "contains \(r)")
        }
    }

    func testMissing_withStraddlingRanges_returnsOnlyHoles() {
        let set = ByteRangeSet([10..<20, 30..<40])
        let cases: [(Range<Int64>, [Range<Int64>])] = [
            (0..<0, []),
            (0..<10, [0..<10]),
            (0..<50, [0..<10, 20..<30, 40..<50]),
            (15..<35, [20..<30]),
            (10..<20, []),
            (12..<18, []),
            (5..<15, [5..<10]),
            (35..<45, [40..<45]),
            (20..<30, [20..<30]),
            (50..<60, [50..<60]),
        ]
        for (r, expected) in cases {
            XCTAssertEqual(set.missing(in: r), expected, "missing in \(r)")
        }
        XCTAssertEqual(ByteRangeSet().missing(in: 3..<9), [3..<9])
    }

    func testPresentEnd_fromVariousOffsets_returnsEndOfRunOrOffset() {
        let set = ByteRangeSet([10..<20, 30..<40])
        let cases: [(Int64, Int64)] = [(0, 0), (9, 9), (10, 20), (19, 20), (20, 20), (25, 25), (30, 40), (39, 40), (40, 40), (100, 100)]
        for (offset, expected) in cases {
            XCTAssertEqual(set.presentEnd(from: offset), expected, "presentEnd from \(offset)")
        }
    }

    func testNextPresent_fromVariousOffsets_returnsFirstPresentByteOrNil() {
        let set = ByteRangeSet([10..<20, 30..<40])
        let cases: [(Int64, Int64?)] = [(0, 10), (10, 10), (15, 15), (19, 19), (20, 30), (29, 30), (35, 35), (39, 39), (40, nil), (100, nil)]
        for (offset, expected) in cases {
            XCTAssertEqual(set.nextPresent(atOrAfter: offset), expected, "nextPresent at or after \(offset)")
        }
        XCTAssertNil(ByteRangeSet().nextPresent(atOrAfter: 0))
    }

    func testByteCountAndIsEmpty_reflectTheRanges() {
        XCTAssertTrue(ByteRangeSet().isEmpty)
        XCTAssertEqual(ByteRangeSet().byteCount, 0)
        let set = ByteRangeSet([0..<10, 20..<25])
        XCTAssertFalse(set.isEmpty)
        XCTAssertEqual(set.byteCount, 15)
    }

    func testDescription_usesInclusiveHTTPStyleRanges() {
        XCTAssertEqual(ByteRangeSet().description, "")
        XCTAssertEqual(ByteRangeSet([0..<1]).description, "0-0")
        XCTAssertEqual(ByteRangeSet([0..<1_048_576, 5_242_880..<6_291_456]).description, "0-1048575,5242880-6291455")
    }

    func testParsing_withCanonicalText_roundTrips() {
        for ranges in [[], [0..<1], [0..<1_048_576, 5_242_880..<6_291_456], [5..<6, 8..<100, 102..<103]] as [[Range<Int64>]] {
            let set = ByteRangeSet(ranges)
            XCTAssertEqual(ByteRangeSet(parsing: set.description), set, "parsing \(set)")
        }
        XCTAssertEqual(ByteRangeSet(parsing: "0-9223372036854775806")?.ranges, [0..<Int64.max])
    }

    func testParsing_withMalformedText_returnsNil() {
        let bad = ["-", "0", "0-", "-5", "a-b", "0-5,", ",0-5", "5-4", "0-5,3-9", "0-5,6-9", "10-20,0-5",
                   "+1-5", "0-5 ", " 0-5", "-1-5", "0-9223372036854775807", "0-99999999999999999999", "0-5,,8-9", "0--5"]
        for text in bad {
            XCTAssertNil(ByteRangeSet(parsing: text), "parsing \(text)")
        }
    }

    func testRandomOperations_matchAReferenceBitmap() {
        let universe = 512
        var rng = SplitMix64(seed: 0x6d65_6469_6166_73)
        var set = ByteRangeSet()
        var bitmap = [Bool](repeating: false, count: universe)
        for step in 0..<3000 {
            let a = Int(rng.next() % UInt64(universe + 1))
            let length = rng.next() % 4 == 0 ? Int(rng.next() % 200) : Int(rng.next() % 24)
            let r = Int64(a)..<Int64(min(universe, a + length))
            if rng.next() % 3 == 0 {
                set.remove(r)
                for i in r { bitmap[Int(i)] = false }
            } else {
                set.insert(r)
                for i in r { bitmap[Int(i)] = true }
            }
            check(set, against: bitmap, rng: &rng, step: step, op: r)
        }
    }

    private func check(_ set: ByteRangeSet, against bitmap: [Bool], rng: inout SplitMix64, step: Int, op: Range<Int64>) {
        let context = "step \(step) after \(op): \(set)"
        XCTAssertEqual(set.ranges, ByteRangeSetTests.runs(of: bitmap, in: 0..<bitmap.count), context)
        XCTAssertEqual(set.byteCount, Int64(bitmap.filter { $0 }.count), context)
        XCTAssertEqual(set.isEmpty, !bitmap.contains(true), context)
        XCTAssertEqual(ByteRangeSet(parsing: set.description), set, context)

        let a = Int(rng.next() % UInt64(bitmap.count + 1))
        let b = a + Int(rng.next() % UInt64(bitmap.count - a + 1))
        let q = Int64(a)..<Int64(b)
        XCTAssertEqual(set.contains(q), !bitmap[a..<b].contains(false), "contains \(q), \(context)")
        let holes = ByteRangeSetTests.runs(of: bitmap.map { !$0 }, in: a..<b)
        XCTAssertEqual(set.missing(in: q), holes, "missing in \(q), \(context)")

        let offset = Int(rng.next() % UInt64(bitmap.count + 8))
        var end = offset
        while end < bitmap.count && bitmap[end] { end += 1 }
        XCTAssertEqual(set.presentEnd(from: Int64(offset)), Int64(end), "presentEnd from \(offset), \(context)")
        let next = offset < bitmap.count ? bitmap[offset...].firstIndex(of: true) : nil
        XCTAssertEqual(set.nextPresent(atOrAfter: Int64(offset)), next.map { Int64($0) }, "nextPresent from \(offset), \(context)")
    }

    /// Maximal runs of `true` within `window`, as half-open ranges.
    private static func runs(of bits: [Bool], in window: Range<Int>) -> [Range<Int64>] {
        var result: [Range<Int64>] = []
        var i = window.lowerBound
        while i < window.upperBound {
            guard bits[i] else { i += 1; continue }
            let start = i
            while i < window.upperBound && bits[i] { i += 1 }
            result.append(Int64(start)..<Int64(i))
        }
        return result
    }
}
