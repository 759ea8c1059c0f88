// A handle read by processes other than its opener: each gets an account of
// its own, a thread's process is looked up once, the opener's threads and
// unknown ones count as the opener's, the number of threads remembered is
// bounded, and the accounts end with the handle.
import XCTest
@testable import MediaCache
@testable import MediaSupport
@testable import MediaTestSupport

final class SharedReadersTests: XCTestCase {
    private func process(_ pid: Int32, _ name: String, start: UInt64 = 1) -> ReaderProcess {
        ReaderProcess(pid: pid, startTime: start, name: name, arguments: name, parentName: "python3")
    }

    /// A table of threads to processes that counts its lookups.
    private final class Threads: Sendable {
        let processes: [Int32: ReaderProcess]
        let lookups = Locked(0)
        init(_ processes: [Int32: ReaderProcess]) { self.processes = processes }
        func lookUp(_ thread: Int32) -> ReaderProcess? {
            lookups.withLock { $0 += 1 }
            return processes[thread]
        }
    }

    func testAChildReadingItsParentsHandle_countsInAnAccountOfItsOwn_untilTheHandleCloses() {
        let book = ReaderBook(clock: TestClock().clock)
        let parent = process(100, "python3")
        let child = process(200, "dd")
        // 100 and 101 are the parent's threads; 200 and 201 the child's.
        let threads = Threads([100: parent, 101: parent, 200: child, 201: child])
        let opener = book.opened(by: parent, as: .play, file: "/a.mkv")
        let shared = SharedReaders(opener: parent, readClass: .play, file: "/a.mkv", book: book,
                                   lookUp: threads.lookUp)
        XCTAssertNil(shared.account(thread: 100), "the opener's thread counts in the handle's account")
        XCTAssertNil(shared.account(thread: 101), "so does another of its threads")
        let first = shared.account(thread: 200)
        XCTAssertEqual(first?.process, child)
        XCTAssertEqual(first?.file, "/a.mkv")
        XCTAssertEqual(first?.readClass, .play, "the handle's class: its reads are served as the opener's")
        XCTAssertTrue(shared.account(thread: 201) === first, "one account per process, whichever thread reads")
        for _ in 0..<10 { _ = shared.account(thread: 200) }
        XCTAssertEqual(threads.lookups.withLock { $0 }, 4, "a thread's process is looked up once")
        XCTAssertEqual(first?.openHandles, 1)
        XCTAssertEqual(Set(book.readers().map(\.process.pid)), [100, 200])

        shared.close()
        book.closed(opener)
        XCTAssertNotNil(first?.endedAt, "the child's reading ends with the handle")
        XCTAssertNil(shared.account(thread: 300), "a closed handle opens no account")
        XCTAssertEqual(book.readers().count, 2)
    }

    func testUnknownThreads_andThreadsPastTheBound_countAsTheOpeners_withoutLookups() {
        let book = ReaderBook(clock: TestClock().clock)
        let parent = process(1, "sh")
        var table: [Int32: ReaderProcess] = [:]
        for thread in Int32(1000)..<Int32(1000 + SharedReaders.maxThreads + 10) {
            table[thread] = process(thread, "job")
        }
        let threads = Threads(table)
        let shared = SharedReaders(opener: parent, readClass: .background, file: "/b.mkv", book: book,
                                   lookUp: threads.lookUp)
        XCTAssertNil(shared.account(thread: 0), "a request of no thread (the kernel's own)")
        XCTAssertNil(shared.account(thread: 5), "a thread whose process is gone")
        XCTAssertNil(shared.account(thread: 5))
        XCTAssertEqual(threads.lookups.withLock { $0 }, 1, "an unknown thread is remembered too")
        var accounts = 0
        for thread in Int32(1000)..<Int32(1000 + SharedReaders.maxThreads + 10) where shared.account(thread: thread) != nil {
            accounts += 1
        }
        XCTAssertEqual(accounts, SharedReaders.maxThreads - 1, "at most maxThreads threads remembered, 5 among them")
        let lookups = threads.lookups.withLock { $0 }
        XCTAssertNil(shared.account(thread: Int32(1000 + SharedReaders.maxThreads + 5)))
        XCTAssertEqual(threads.lookups.withLock { $0 }, lookups, "past the bound, no /proc read per read")
        XCTAssertEqual(book.readers().first?.readClass, .background)
    }

    func testAPidReusedByANewProcess_isAnotherProcess() {
        let book = ReaderBook(clock: TestClock().clock)
        let opener = process(7, "bash", start: 10)
        let threads = Threads([7: process(7, "bash", start: 99)])
        let shared = SharedReaders(opener: opener, readClass: .play, file: "/c", book: book, lookUp: threads.lookUp)
        XCTAssertEqual(shared.account(thread: 7)?.process.startTime, 99,
                       "same pid, another start time: not the opener")
    }
}
