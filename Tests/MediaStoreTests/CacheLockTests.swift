// CacheLock: one holder per cache directory, a clear refusal naming the
// holder, and the lock gone with the holder. flock conflicts between two
// opens of the file even within one process, so one test process suffices.
import XCTest
@testable import MediaStore
@testable import MediaSupport
@testable import MediaTestSupport
#if canImport(Glibc)
import Glibc
#endif

final class CacheLockTests: XCTestCase {
    private var base = ""

    override func setUpWithError() throws {
        base = try TemporaryDirectory.make("lock")
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: base)
    }

    func testSecondLock_whileTheFirstIsHeld_throwsEBUSYNamingDirectoryAndPid() throws {
        let first = try CacheLock(directory: base, wait: 0, clock: .system)
        XCTAssertThrowsError(try CacheLock(directory: base, wait: 0.2, clock: .system)) { error in
            XCTAssertEqual((error as? MediaError)?.errno, EBUSY)
            XCTAssertTrue("\(error)".contains(base), "\(error)")
            XCTAssertTrue("\(error)".contains("process \(getpid())"), "\(error)")
        }
        withExtendedLifetime(first) {}
    }

    func testLock_afterTheHolderIsGone_isTaken() throws {
        var first: CacheLock? = try CacheLock(directory: base, wait: 0, clock: .system)
        XCTAssertNotNil(first)
        first = nil
        XCTAssertNoThrow(try CacheLock(directory: base, wait: 0, clock: .system))
    }

    func testLock_releasedWhileWaiting_isTakenBeforeTheWaitEnds() throws {
        let released = expectation(description: "released")
        try holdFor(0.2, then: released)
        XCTAssertNoThrow(try CacheLock(directory: base, wait: 30, clock: .system))
        wait(for: [released], timeout: 5)
    }

    /// Takes the lock and leaves it to a closure that drops it after `seconds`.
    private func holdFor(_ seconds: Double, then done: XCTestExpectation,
                         saying say: (CacheLock) -> Void = { _ in }) throws {
        let held = try CacheLock(directory: base, wait: 0, clock: .system)
        say(held)
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds) {
            withExtendedLifetime(held) {}
            done.fulfill()
        }
    }

    func testLockFile_holdsThePidOfTheHolder() throws {
        let lock = try CacheLock(directory: base, wait: 0, clock: .system)
        let text = try String(contentsOfFile: base + "/lock", encoding: .utf8)
        XCTAssertEqual(text, "\(getpid())\n")
        withExtendedLifetime(lock) {}
    }

    func testLockFile_withGarbageText_isRefusedWithoutAPid() throws {
        let first = try CacheLock(directory: base, wait: 0, clock: .system)
        let fd = open(base + "/lock", O_WRONLY | O_TRUNC)
        XCTAssertGreaterThanOrEqual(fd, 0)
        _ = write(fd, "99999999999999999999999\n", 24)
        close(fd)
        XCTAssertThrowsError(try CacheLock(directory: base, wait: 0, clock: .system)) { error in
            XCTAssertTrue("\(error)".contains("another process"), "\(error)")
        }
        withExtendedLifetime(first) {}
    }

    func testLockFile_thatIsASymlink_isNotFollowed() throws {
        let target = base + "/elsewhere"
        XCTAssertTrue(FileManager.default.createFile(atPath: target, contents: Data("keep".utf8)))
        XCTAssertEqual(symlink(target, base + "/lock"), 0)
        XCTAssertThrowsError(try CacheLock(directory: base, wait: 0, clock: .system)) { error in
            XCTAssertEqual((error as? MediaError)?.errno, ELOOP)
        }
        XCTAssertEqual(FileManager.default.contents(atPath: target), Data("keep".utf8))
    }

    func testSecondLock_whileTheHolderServesAMountStillMounted_isRefusedAtOnceNamingIt() throws {
        let first = try CacheLock(directory: base, wait: 0, clock: .system)
        first.serving(at: "/srv/media mnt")
        let asked = Locked(0)
        XCTAssertThrowsError(try CacheLock(directory: base, wait: 30, clock: .system, isMounted: { path in
            asked.withLock { $0 += 1 }
            return path == "/srv/media mnt"
        })) { error in
            XCTAssertEqual((error as? MediaError)?.errno, EBUSY)
            XCTAssertTrue("\(error)".contains("process \(getpid()) (the mount at /srv/media mnt)"), "\(error)")
        }
        // Once: a waiter that polled would have asked again.
        XCTAssertEqual(asked.withLock { $0 }, 1)
        withExtendedLifetime(first) {}
    }

    func testSecondLock_whileTheHolderDeparts_waitsForIt() throws {
        let released = expectation(description: "released")
        try holdFor(0.2, then: released) { held in
            held.serving(at: "/srv/mnt")
            held.departing()
        }
        XCTAssertEqual(try String(contentsOfFile: base + "/lock", encoding: .utf8), "\(getpid())\n")
        // Its mount is gone from the table though the file still names it: wait.
        XCTAssertNoThrow(try CacheLock(directory: base, wait: 30, clock: .system, isMounted: { _ in false }))
        wait(for: [released], timeout: 5)
    }

    func testLockFile_parsesPidAndOnlyAWholeServingLine() {
        XCTAssertEqual(CacheLock.parse("12\nserving /a b/c\n"), CacheLock.Holder(pid: 12, serving: "/a b/c"))
        XCTAssertEqual(CacheLock.parse("12\nserving /a b/c"), CacheLock.Holder(pid: 12, serving: nil))
        XCTAssertEqual(CacheLock.parse("12\nserving relative\n"), CacheLock.Holder(pid: 12, serving: nil))
        XCTAssertEqual(CacheLock.parse("x\nserving /a\n"), CacheLock.Holder(pid: nil, serving: nil))
        XCTAssertEqual(CacheLock.parse(""), CacheLock.Holder())
    }
}
