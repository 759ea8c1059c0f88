import XCTest
@testable import MediaStore
@testable import MediaSupport
@testable import MediaTestSupport
#if canImport(Glibc)
import Glibc
#endif

final class AnswerJournalTests: XCTestCase {
    private var base = ""
    private var path: String { base + "/answers" }

    override func setUpWithError() throws {
        base = try TemporaryDirectory.make("answers")
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: base)
    }

    private func answer(_ n: Int, length: Int64 = 1_000, accessed: Int64 = 1_700_000_000,
                        validated: Int64 = 1_700_000_000) -> EntryMeta {
        EntryMeta(url: "http://h.example/\(n).bin",
                  info: ContentInfo(length: length, contentType: "video/mp4", etag: "\"e\(n)\"",
                                    lastModified: "Tue, 01 Oct 2024 10:00:00 GMT", acceptsRanges: true),
                  present: ByteRangeSet(), lastAccess: accessed, lastValidated: validated)
    }

    private func opened(accessedAfter: Int64? = nil) throws -> AnswerJournal {
        let journal = AnswerJournal(path: path)
        try journal.open(accessedAfter: accessedAfter)
        return journal
    }

    private func size() -> Int64 {
        var st = stat()
        return stat(path, &st) == 0 ? Int64(st.st_size) : -1
    }

    func testAnswers_areReadBack_andAfterAReopen() throws {
        let answers = (0..<100).map { answer($0, length: Int64($0) * 7) }
        try opened().append(answers)
        let journal = try opened()
        XCTAssertEqual(journal.count, 100)
        for expected in answers { XCTAssertEqual(journal.answer(forKey: expected.url), expected) }
        XCTAssertNil(journal.answer(forKey: "http://h.example/none.bin"))
        XCTAssertEqual(AnswerJournal.read(path: path).count, 100)
    }

    func testTheLastAnswer_wins_andSupersededOnesAreRewrittenAway() throws {
        var journal = try opened()
        for round in 0..<30 { try journal.append((0..<100).map { answer($0, length: Int64(round)) }) }
        let grown = size()
        journal = try opened()
        XCTAssertLessThan(size(), grown / 10, "2,900 superseded answers were kept")
        XCTAssertEqual(journal.count, 100)
        XCTAssertEqual(journal.answer(forKey: answer(5).url)?.info.length, 29)
        // Still appendable where the rewrite ended.
        try journal.append([answer(5, length: 99)])
        XCTAssertEqual(try opened().answer(forKey: answer(5).url)?.info.length, 99)
    }

    func testATornTail_isCut_andTheWholeAnswersBeforeItKept() throws {
        try opened().append((0..<3).map { answer($0) })
        let whole = size()
        XCTAssertEqual(truncate(path, off_t(whole - 10)), 0)
        let journal = try opened()
        XCTAssertNotNil(journal.answer(forKey: answer(0).url))
        XCTAssertNotNil(journal.answer(forKey: answer(1).url))
        XCTAssertNil(journal.answer(forKey: answer(2).url))
        XCTAssertLessThan(size(), whole - 10, "the partial answer was left for the next one to follow")
        try journal.append([answer(3)])
        XCTAssertNotNil(try opened().answer(forKey: answer(3).url))
    }

    func testADamagedAnswer_isAMiss_andTheOthersStay() throws {
        try opened().append((0..<3).map { answer($0) })
        // Flip one byte of the middle answer's etag.
        var bytes = try XCTUnwrap(FileManager.default.contents(atPath: path))
        let etag = Data("\"e1\"".utf8)
        let at = try XCTUnwrap(bytes.range(of: etag)).lowerBound + 1
        bytes[at] = UInt8(ascii: "x")
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: bytes))
        let journal = try opened()
        XCTAssertNil(journal.answer(forKey: answer(1).url), "a damaged answer was believed")
        XCTAssertEqual(journal.answer(forKey: answer(0).url), answer(0))
        XCTAssertEqual(journal.answer(forKey: answer(2).url), answer(2))
    }

    func testHostileFrameHeaders_endTheScan_neverTrap() throws {
        for hostile in ["a 99999999999999999999999 1\n", "a -5 1\n", "a 10 99999999999999999999\n",
                        "a 2000000 1\n", "b 10 1\n", "a 10\n", "\u{0}\u{0}\u{0}"] {
            try? FileManager.default.removeItem(atPath: path)
            try opened().append([answer(0)])
            let handle = try XCTUnwrap(FileHandle(forWritingAtPath: path))
            handle.seekToEndOfFile()
            handle.write(Data(hostile.utf8) + Data(repeating: UInt8(ascii: "z"), count: 40))
            handle.closeFile()
            let journal = try opened()
            XCTAssertEqual(journal.answer(forKey: answer(0).url), answer(0), hostile)
            try journal.append([answer(1)])
            XCTAssertEqual(try opened().count, 2, hostile)
        }
    }

    func testAFileOfAnotherFormat_isStartedAfresh() throws {
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data("mediafs-answers 2\na 1 1\nx".utf8)))
        let journal = try opened()
        XCTAssertEqual(journal.count, 0)
        try journal.append([answer(0)])
        XCTAssertEqual(try opened().answer(forKey: answer(0).url), answer(0))
    }

    func testAnswersNotAccessedWithinTheAge_areDropped() throws {
        try opened().append([answer(0, accessed: 1_000), answer(1, accessed: 2_000)])
        let journal = try opened(accessedAfter: 1_500)
        XCTAssertNil(journal.answer(forKey: answer(0).url))
        XCTAssertNotNil(journal.answer(forKey: answer(1).url))
        XCTAssertEqual(try opened().count, 1)
    }

    func testForgetAndClear() throws {
        let journal = try opened()
        try journal.append((0..<3).map { answer($0) })
        XCTAssertEqual(journal.forget([answer(1).url, "http://h.example/none.bin"]), [answer(1).url])
        XCTAssertNil(journal.answer(forKey: answer(1).url))
        XCTAssertEqual(try opened().count, 2)
        journal.clear()
        XCTAssertEqual(journal.count, 0)
        XCTAssertEqual(try opened().count, 0)
    }

    func testAnswerClaimingBytes_isNeverAppended() throws {
        var claiming = answer(0)
        claiming.present = ByteRangeSet([0..<10])
        let journal = try opened()
        try journal.append([claiming])
        XCTAssertNil(journal.answer(forKey: claiming.url))
    }

    // MARK: With the store's meta files

    func testReadMeta_prefersANewerAnswer_toAMetaFileClaimingNoBytes_butNeverToOneClaimingBytes() throws {
        let store = try CacheStore(root: base + "/cache")
        store.openAnswers(now: Clock.system.wall())
        let old = answer(0, length: 10, validated: 100)
        let new = answer(0, length: 20, validated: 200)
        try store.saveMeta(old, forKey: old.url)
        try store.saveAnswers([new])
        XCTAssertEqual(store.loadMeta(forKey: old.url), new)
        // A meta file at least as new wins.
        let newer = answer(0, length: 30, validated: 200)
        try store.saveMeta(newer, forKey: old.url)
        XCTAssertEqual(store.loadMeta(forKey: old.url), newer)
        // One that claims bytes wins however old.
        var claiming = answer(0, length: 10, validated: 50)
        claiming.present = ByteRangeSet([0..<4])
        let fd = try store.openData(forKey: claiming.url, length: 10)
        close(fd)
        try store.saveMeta(claiming, forKey: claiming.url)
        XCTAssertEqual(store.loadMeta(forKey: claiming.url), claiming)
    }

    func testSaveAnswers_withoutAJournal_makesEntryDirectories() throws {
        let root = base + "/cache"
        let store = try CacheStore(root: root)
        // A symlink where the journal goes is refused.
        XCTAssertEqual(symlink(base + "/elsewhere", root + "/answers"), 0)
        store.openAnswers(now: Clock.system.wall())
        XCTAssertFalse(store.answers.isOpen)
        try store.saveAnswers([answer(0)])
        XCTAssertEqual(store.loadMeta(forKey: answer(0).url), answer(0))
        XCTAssertTrue(FileManager.default.fileExists(atPath: store.directory(forKey: answer(0).url) + "/meta"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: base + "/elsewhere"))
    }
}

final class AnswerIndexTests: XCTestCase {
    func testItAgreesWithADictionary_throughGrowthOverwritesAndRemovals() {
        var index = AnswerIndex()
        var model: [UInt64: UInt64] = [:]
        var generator = SystemRandomNumberGenerator()
        var keys: [UInt64] = [2, 3]
        for step in 0..<20_000 {
            let key = step % 5 == 0 ? keys.randomElement(using: &generator)! : UInt64.random(in: 2...UInt64.max,
                                                                                              using: &generator)
            keys.append(key)
            let value = UInt64(step)
            index[key] = value
            model[key] = value
        }
        for key in keys.prefix(5) {
            index[key] = nil
            model[key] = nil
        }
        XCTAssertEqual(index.count, model.count)
        for key in keys { XCTAssertEqual(index[key], model[key]) }
        XCTAssertEqual(Dictionary(uniqueKeysWithValues: index.pairs.map { ($0.key, $0.value) }), model)
        XCTAssertNil(index[12_345])
    }

    func testHashZero_sharesTheKeyOfOne() {
        var index = AnswerIndex()
        index[0] = 7
        XCTAssertEqual(index[1], 7)
        index[1] = 8
        XCTAssertEqual(index[0], 8)
        XCTAssertEqual(index.count, 1)
    }
}
