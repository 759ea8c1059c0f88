// The parts of LoaderState, each alone, without a loader: the rules each
// owns hold whatever the loader that calls them does.
import Foundation
import XCTest
@testable import MediaCache
@testable import MediaSources
@testable import MediaSegmented
@testable import MediaStore
@testable import MediaSupport
@testable import MediaTestSupport

final class CachedBytesTests: XCTestCase {
    func testAClaim_isRefused_whileAResetIsNotCarriedOut() {
        var bytes = CachedBytes()
        XCTAssertTrue(bytes.claim(0..<100))
        bytes.markReset()
        XCTAssertTrue(bytes.present.isEmpty, "a reset unclaims every byte at once")
        XCTAssertFalse(bytes.claim(0..<10), "invariant 1: no claim while a freeing is marked")
        XCTAssertTrue(bytes.present.isEmpty)
        bytes.resetsDone(upTo: 1)
        XCTAssertFalse(bytes.isFreeingAnything)
        XCTAssertTrue(bytes.claim(0..<10))
        XCTAssertEqual(bytes.present.byteCount, 10)
    }

    func testAClaim_isRefused_onlyWhereATrimPunches() {
        var bytes = CachedBytes()
        bytes.claim(0..<1000)
        var doomed = ByteRangeSet()
        doomed.insert(100..<200)
        bytes.markTrim(doomed)
        XCTAssertEqual(bytes.present.byteCount, 900)
        XCTAssertFalse(bytes.claim(150..<160), "bytes being punched out are not claimed")
        XCTAssertTrue(bytes.claim(300..<400), "bytes elsewhere are")
        bytes.trimDone(doomed)
        XCTAssertFalse(bytes.isFreeingAnything)
        XCTAssertTrue(bytes.claim(150..<160))
    }

    func testResetsDone_neverGoBack() {
        var bytes = CachedBytes()
        bytes.markReset()
        bytes.markReset()
        bytes.resetsDone(upTo: 2)
        bytes.resetsDone(upTo: 1)
        XCTAssertFalse(bytes.isFreeing(0..<1), "a late report of an older reset does not undo a newer one's")
        bytes.markReset()
        XCTAssertTrue(bytes.isFreeing(0..<1))
    }

    func testPreadsAndPwrites_inUse_areSeenByAFreeing() {
        var bytes = CachedBytes()
        bytes.beginReading(0..<10, token: 1)
        bytes.beginWriting(50..<60, by: 7)
        XCTAssertTrue(bytes.isBusy)
        XCTAssertTrue(bytes.isInUse { $0.overlaps(55..<56) })
        XCTAssertFalse(bytes.isInUse { $0.overlaps(20..<30) })
        bytes.endReading(token: 1)
        bytes.endWriting(by: 7)
        XCTAssertFalse(bytes.isBusy)
    }
}

final class TransferBookTests: XCTestCase {
    func testReadTokensAndWaits_neverShareANumber() {
        var book = TransferBook(clock: .system)
        let token = book.takeNumber()
        var buffer = [UInt8](repeating: 0, count: 4)
        buffer.withUnsafeMutableBytes { raw in
            let wait = book.addWait(0..<4, buffer: raw)
            XCTAssertNotEqual(token, wait)
            XCTAssertTrue(book.isWaitedOn(2..<3))
            book.filled(wait, 0..<2)
            XCTAssertEqual(book.waits[wait]?.filled.byteCount, 2)
            book.removeWait(wait)
        }
        XCTAssertFalse(book.isWaitedOn(0..<4))
    }

    /// A reader's stop keeps what the transfer still hands over; a purge's
    /// or a change's stop keeps nothing, even of one a reader stopped first.
    func testStops_keepArrivalsOnlyUntilTheCacheStopsTheTransfer() {
        var book = TransferBook(clock: .system)
        let transfer = LoaderState.Transfer(end: 100, position: 0, owner: ObjectIdentifier(self), priority: .read)
        book.add(1, transfer)
        book.add(2, transfer)
        book.add(3, transfer)
        book.stop(1)
        book.cancel(2)
        book.stop(3)
        book.cancel(3)
        XCTAssertEqual([1, 2, 3].map { book.transfers[$0]!.cancelled }, [true, true, true])
        XCTAssertEqual([1, 2, 3].map { book.transfers[$0]!.takesBytes }, [true, false, false])
        book.stop(2)
        XCTAssertFalse(book.transfers[2]!.takesBytes, "a reader's stop after the cache's keeps nothing")
    }

    func testLastError_isTimedOnItsClock() {
        let clock = TestClock()
        var book = TransferBook(clock: clock.clock)
        book.setLastError(MediaError.io("gone"))
        let first = book.lastErrorAt
        clock.advance(100)
        book.setLastError(nil)
        XCTAssertNil(book.lastError)
        XCTAssertGreaterThanOrEqual(book.lastErrorAt - first, 100, "cleared, it says when")
    }
}

final class HandleBookTests: XCTestCase {
    func testPageCacheHandles_ofAnOlderVersion_areSeen_untilTheyClose() {
        var handles = HandleBook()
        XCTAssertEqual(handles.opened(), 1)
        handles.pageCacheOpened(generation: 0)
        XCTAssertTrue(handles.pageCacheHeld(byOtherThan: 1))
        XCTAssertFalse(handles.pageCacheHeld(byOtherThan: 0))
        handles.pageCacheClosed(generation: 0)
        handles.pageCacheClosed(generation: 0)
        XCTAssertFalse(handles.pageCacheHeld(byOtherThan: 1), "closed once, counted once")
        XCTAssertEqual(handles.closed(), 0)
        XCTAssertEqual(handles.closed(), 0, "a late release never goes below none")
    }

    func testAReplacedDataFile_endsTheKernelsReadsOfTheOldOne() {
        var handles = HandleBook()
        let old = handles.kernelReaderAdded()
        XCTAssertTrue(handles.kernelReading)
        handles.dataFileReplaced()
        XCTAssertFalse(handles.kernelReading)
        let new = handles.kernelReaderAdded()
        handles.kernelReaderRemoved(version: old)
        XCTAssertTrue(handles.kernelReading, "the old file's backing gone says nothing of the new one's")
        handles.kernelReaderRemoved(version: new)
        XCTAssertFalse(handles.kernelReading)
    }

    func testKernelClean_onlyMovesForward() {
        var handles = HandleBook()
        handles.kernelForgot(upTo: 3)
        handles.kernelForgot(upTo: 2)
        XCTAssertEqual(handles.kernelClean, 3)
    }
}

final class VersionStateTests: XCTestCase {
    func testAChange_bumpsTheGeneration_andForgetsPartialAnswers() {
        var version = VersionState(info: ContentInfo(length: 10, etag: "\"a\""), lastValidated: 5)
        version.tookPartial()
        let generation = version.changed(to: ContentInfo(length: 20, etag: "\"b\""), validatedAt: 9)
        XCTAssertEqual(generation, 1)
        XCTAssertEqual(version.generation, 1)
        XCTAssertFalse(version.sawPartial)
        XCTAssertEqual(version.info?.length, 20)
        XCTAssertEqual(version.lastValidated, 9)
    }

    func testProbeRetries_backOffByFailuresInARow_andAnAnswerResetsThem() {
        var version = VersionState()
        var asked: [Int] = []
        version.probeWillRetry(from: 100) { asked.append($0); return 1 }
        version.probeWillRetry(from: 100) { asked.append($0); return 2 }
        XCTAssertEqual(asked, [1, 2])
        guard case .retrying(let at) = version.probe else { return XCTFail("\(version.probe)") }
        XCTAssertEqual(at, 102)
        version.learned(ContentInfo(length: 1), validatedAt: 7)
        XCTAssertEqual(version.probeAttempts, 0)
        guard case .idle = version.probe else { return XCTFail("\(version.probe)") }
    }

    func testAListing_marksOnlyAnUnknownEntry() {
        var version = VersionState()
        XCTAssertTrue(version.markListed())
        XCTAssertTrue(version.listed)
        var known = VersionState(info: ContentInfo(length: 1), lastValidated: 0)
        XCTAssertFalse(known.markListed())
        XCTAssertFalse(known.listed)
    }
}

final class LoaderStateTransitionTests: XCTestCase {
    private func info(_ length: Int64 = 1000) -> ContentInfo {
        ContentInfo(length: length, etag: "\"a\"")
    }

    func testTheClaimRule_needsTheCurrentDataFileAndNoFreeing_andMarksTheEntryUnsaved() {
        var state = LoaderState(clock: .system)
        state.learned(info(), at: 1, hasEntry: true, readClasses: false)
        state.saved()
        let written = state.handles.dataVersion
        state.handles.dataFileReplaced()
        XCTAssertFalse(state.claim(written: 0..<10, intoDataVersion: written), "written into a replaced data file")
        XCTAssertFalse(state.dirty)
        XCTAssertTrue(state.claim(written: 0..<10, intoDataVersion: state.handles.dataVersion))
        XCTAssertTrue(state.dirty, "a claim is saved")
        state.saved()
        state.markReset()
        XCTAssertTrue(state.dirty)
        state.saved()
        XCTAssertFalse(state.claim(written: 10..<20, intoDataVersion: state.handles.dataVersion), "a freeing is marked")
        XCTAssertFalse(state.dirty)
    }

    /// Each transition the metadata keeps marks the entry unsaved; one that
    /// changes nothing, or that the metadata need not keep at once, does not.
    func testEveryKeptChange_marksTheEntryUnsaved() {
        let cases: [(String, (inout LoaderState) -> Void, Bool)] = [
            ("learned", { $0.learned(self.info(), at: 5, hasEntry: true, readClasses: true) }, true),
            ("validated", { $0.validated(at: 9) }, true),
            ("confirmVersion", { $0.confirmVersion(self.info()) }, true),
            ("ignoresRanges", { $0.ignoresRanges() }, true),
            ("pin", { _ = $0.pin(true) }, true),
            ("pin unchanged", { _ = $0.pin(false) }, false),
            ("played, a scan's", { $0.markScanOnly(); $0.played() }, true),
            ("played, a player's", { $0.played() }, false),
            ("trim of nothing", { $0.markTrim(ByteRangeSet()) }, false),
            ("trim", { var doomed = ByteRangeSet(); doomed.insert(0..<10); $0.markTrim(doomed) }, true),
            ("accessed", { $0.accessed(at: 7) }, false),
            ("markUnsaved", { $0.markUnsaved() }, true),
        ]
        for (name, change, kept) in cases {
            var state = LoaderState(clock: .system)
            state.learned(info(), at: 1, hasEntry: true, readClasses: false)
            _ = state.claim(written: 0..<100, intoDataVersion: state.handles.dataVersion)
            state.saved()
            change(&state)
            XCTAssertEqual(state.dirty, kept, name)
        }
    }

    func testAPlayersRead_endsScanOnly_andForgetsTheScansReads() {
        var state = LoaderState(clock: .system)
        state.learned(info(), at: 1, hasEntry: true, readClasses: true)
        XCTAssertTrue(state.use.scanOnly, "new with read classes: a scan's until a player reads")
        state.bytes.noteScanRead(0..<10)
        state.played()
        XCTAssertFalse(state.use.scanOnly)
        XCTAssertTrue(state.bytes.scanRead.isEmpty)
    }
}

final class PassingBytesTests: XCTestCase {
    private func bytes(_ range: Range<Int>) -> [UInt8] { range.map { UInt8(truncatingIfNeeded: $0 &* 7) } }

    func testWhatNoReadTook_isKept_andTheNextReadTakesIt_once() {
        var passing = PassingBytes()
        let chunk = bytes(1000..<1100)
        var taken = ByteRangeSet()
        taken.insert(1000..<1040)
        chunk.withUnsafeBytes { passing.keep($0, at: 1000, except: taken) }
        XCTAssertEqual(passing.count, 60, "the waiting read's part is not kept twice")

        var buffer = [UInt8](repeating: 0, count: 50)
        let copied = buffer.withUnsafeMutableBytes { passing.take(1030..<1080, into: $0) }
        XCTAssertEqual(copied, [1040..<1080])
        XCTAssertEqual(Array(buffer[10...]), bytes(1040..<1080))
        XCTAssertEqual(Array(buffer[..<10]), [UInt8](repeating: 0, count: 10), "nothing kept there")
        XCTAssertEqual(passing.count, 20, "what the read took is gone; the rest stays")
        buffer = [UInt8](repeating: 0, count: 20)
        XCTAssertEqual(buffer.withUnsafeMutableBytes { passing.take(1080..<1100, into: $0) }, [1080..<1100])
        XCTAssertEqual(buffer, bytes(1080..<1100))
        XCTAssertTrue(passing.isEmpty)
    }

    func testItIsBounded_theOldestGoFirst() {
        var passing = PassingBytes()
        let piece = PassingBytes.capacity / 4
        for n in 0..<6 {
            let chunk = [UInt8](repeating: UInt8(n), count: piece)
            chunk.withUnsafeBytes { passing.keep($0, at: Int64(n * piece), except: ByteRangeSet()) }
        }
        XCTAssertEqual(passing.count, PassingBytes.capacity)
        var buffer = [UInt8](repeating: 9, count: 6 * piece)
        let copied = buffer.withUnsafeMutableBytes { passing.take(0..<Int64(6 * piece), into: $0) }
        XCTAssertEqual(copied, [Int64(2 * piece)..<Int64(3 * piece), Int64(3 * piece)..<Int64(4 * piece),
                                Int64(4 * piece)..<Int64(5 * piece), Int64(5 * piece)..<Int64(6 * piece)])
        XCTAssertEqual(buffer[2 * piece], 2)
        XCTAssertEqual(buffer[0], 9, "the oldest were dropped, not served")
        passing.clear()
        XCTAssertEqual(passing.count, 0)
    }
}
