// The fetcher's admission without a network: places per origin, reads
// shared among files in turn, background transfers only in what reads
// leave, promotion and cancellation of waiting transfers.
import XCTest
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport

final class TransferAdmissionTests: XCTestCase {
    let a = HTTPOrigin(url: "http://media.example:8080/")!
    let b = HTTPOrigin(url: "http://media.example:8081/")!
    var nextID: TransferID = 1

    func makeAdmission() -> TransferAdmission {
        TransferAdmission(perOrigin: 8, readReserve: 2, maxProbes: 6, maxBackground: 4)
    }

    @discardableResult
    func enqueue(_ admission: TransferAdmission, _ origin: HTTPOrigin, _ group: String,
                 _ priority: FetchRequest.Priority = .read, count: Int = 1) -> [TransferID] {
        (0..<count).map { _ in
            let id = nextID
            nextID += 1
            admission.enqueue(id, origin: origin, group: group, priority: priority)
            return id
        }
    }

    func testReadsBeyondTheOriginsPlacesWaitAndAnotherPortIsAnotherOrigin() {
        let admission = makeAdmission()
        let fileA = enqueue(admission, a, "A", count: 24)
        XCTAssertEqual(admission.admit(), Array(fileA.prefix(8)))
        let fileB = enqueue(admission, b, "B")
        XCTAssertEqual(admission.admit(), fileB, "another port is another origin: B starts at once")
        XCTAssertEqual(admission.admit(), [])
    }

    func testAnFTPOriginRunsAtMostThreeTransfers_asFTPServersAllowAUser_andSFTPIsNotCapped() {
        let admission = makeAdmission()
        let ftp = HTTPOrigin(url: "ftp://seedbox.example/")!
        let sftp = HTTPOrigin(url: "sftp://seedbox.example/")!
        enqueue(admission, ftp, "f1", count: 4)
        enqueue(admission, ftp, "f2", count: 4)
        enqueue(admission, sftp, "s", count: 8)
        let started = admission.admit()
        XCTAssertEqual(started.count, TransferAdmission.maxFTPConnections + 8)
        XCTAssertEqual(started.filter { $0 <= 8 }.count, 3)
    }

    func testAnOriginThatAnsweredOverHTTP2TakesItsStreamsAtOnceAndAnHTTP1AnswerTakesThatBack() {
        let admission = TransferAdmission(perOrigin: 8, readReserve: 2, maxProbes: 6, maxBackground: 4,
                                          perMultiplexedOrigin: 64)
        let first = enqueue(admission, a, "A", count: 70)
        XCTAssertEqual(admission.admit(), Array(first.prefix(8)), "not known to multiplex: 8 at once")
        admission.learned(a, multiplexes: true)
        XCTAssertTrue(admission.multiplexes(a))
        XCTAssertFalse(admission.multiplexes(b), "another port is another origin")
        XCTAssertEqual(admission.admit(), Array(first[8..<64]), "a waiting wave gets the streams at once")
        for id in first.prefix(64) { admission.remove(id) }
        XCTAssertEqual(admission.admit(), Array(first[64...]))
        for id in first[64...] { admission.remove(id) }
        XCTAssertEqual(admission.admit(), [])
        XCTAssertEqual(admission.originCount, 0, "an idle origin is forgotten")
        let second = enqueue(admission, a, "A", count: 70)
        XCTAssertEqual(admission.admit(), Array(second.prefix(64)), "what it learned outlives its idle time")
        admission.learned(a, multiplexes: false)
        for id in second.prefix(60) { admission.remove(id) }
        XCTAssertEqual(admission.admit(), Array(second[64..<68]), "an HTTP/1 answer: 8 at once again")
        let probes = enqueue(admission, b, "B", .probe, count: 8)
        XCTAssertEqual(admission.admit(), Array(probes.prefix(6)), "probes keep their own cap")
    }

    func testReadaheadAtAMultiplexingOriginHasItsOwnCapAndLeavesThePlainOnesTheirs() {
        let admission = TransferAdmission(perOrigin: 8, readReserve: 2, maxProbes: 6, maxBackground: 4,
                                          perMultiplexedOrigin: 64, maxMultiplexedBackground: 32)
        admission.learned(a, multiplexes: true)
        let ahead = enqueue(admission, a, "A", .readahead, count: 40)
        let plain = enqueue(admission, b, "B", .readahead, count: 6)
        let started = admission.admit()
        XCTAssertEqual(started.filter(ahead.contains), Array(ahead.prefix(32)), "streams: 32 at once")
        XCTAssertEqual(started.filter(plain.contains), Array(plain.prefix(4)), "the plain origin keeps its 4")
        admission.remove(plain[0])
        XCTAssertEqual(admission.admit(), [plain[4]], "a plain place freed goes to the plain origin")
        admission.remove(ahead[0])
        admission.remove(ahead[1])
        XCTAssertEqual(admission.admit(), [ahead[32], ahead[33]])
        // A running readahead that a reader joins leaves the pool.
        admission.promote(ahead[2])
        XCTAssertEqual(admission.admit(), [ahead[34]])
        admission.learned(a, multiplexes: false)
        for id in ahead[3..<35] { admission.remove(id) }
        XCTAssertEqual(admission.admit(), [], "HTTP/1 again: the plain cap, which B's four fill")
    }

    func testAReadOfAnotherFileTakesTheNextFreePlaceBeforeTheDeepQueue() {
        let admission = makeAdmission()
        let fileA = enqueue(admission, a, "A", count: 24)
        XCTAssertEqual(admission.admit(), Array(fileA.prefix(8)))
        let fileB = enqueue(admission, a, "B", count: 2)
        XCTAssertEqual(admission.admit(), [], "no place is free yet")
        admission.remove(fileA[0])
        XCTAssertEqual(admission.admit(), [fileB[0]])
        // Then in turn: A, B, A, A...
        admission.remove(fileA[1])
        admission.remove(fileA[2])
        admission.remove(fileA[3])
        XCTAssertEqual(admission.admit(), [fileA[8], fileB[1], fileA[9]])
    }

    func testAScanReadThatWaitsWhilePlayersRunIsCountedDelayedAndOneThatStartsAtOnceIsNot() {
        let admission = makeAdmission()
        enqueue(admission, a, "scan0", .scan)
        XCTAssertEqual(admission.admit().count, 1)
        XCTAssertEqual(admission.scansDelayed, 0, "a scan read that starts at once waited for nobody")
        // A player fills the origin; scans asked now wait behind it.
        let film = enqueue(admission, a, "film", count: 7)
        XCTAssertEqual(admission.admit(), film)
        let scans = enqueue(admission, a, "scan1", .scan, count: 2)
        XCTAssertEqual(admission.admit(), [])
        for id in film { admission.remove(id) }
        XCTAssertEqual(admission.admit(), scans)
        XCTAssertEqual(admission.scansDelayed, 2)
        // Scans that wait behind other scans only (the places scans may
        // take are full, no player runs) were not delayed by playback.
        admission.scansDelayed = 0
        let more = enqueue(admission, a, "scan2", .scan, count: 6)
        let first = admission.admit()
        XCTAssertEqual(first.count, 3, "six places for background transfers, three taken")
        for id in first + scans { admission.remove(id) }
        XCTAssertEqual(admission.admit().count, 3)
        XCTAssertEqual(admission.scansDelayed, 0, "\(more)")
    }

    func testFilesWithWaitingReadsAreServedInTurn() {
        let admission = makeAdmission()
        let groups = ["A", "B", "C"].map { enqueue(admission, a, $0, count: 6) }
        let first = admission.admit()
        XCTAssertEqual(first, [groups[0][0], groups[1][0], groups[2][0],
                               groups[0][1], groups[1][1], groups[2][1],
                               groups[0][2], groups[1][2]])
        for id in first { admission.remove(id) }
        XCTAssertEqual(admission.admit(), [groups[2][2], groups[0][3], groups[1][3], groups[2][3],
                                           groups[0][4], groups[1][4], groups[2][4], groups[0][5]])
    }

    func testBackgroundTransfersTakeOnlyWhatReadsLeaveAndKeepPlacesForReads() {
        let admission = makeAdmission()
        let reads = enqueue(admission, a, "A", count: 9)
        let readahead = enqueue(admission, a, "A", .readahead)
        let probes = enqueue(admission, a, "dir", .probe, count: 8)
        XCTAssertEqual(admission.admit(), Array(reads.prefix(8)))
        for id in reads.prefix(8) { admission.remove(id) }
        // The ninth read first; then probes and readahead while fewer than 8 - 2 run.
        XCTAssertEqual(admission.admit(), [reads[8]] + Array(probes.prefix(5)))
        admission.remove(reads[8])
        XCTAssertEqual(admission.admit(), [probes[5]], "probes are capped at 6, and leave 2 places")
        for id in probes.prefix(3) { admission.remove(id) }
        XCTAssertEqual(admission.admit(), [probes[6], probes[7], readahead[0]], "readahead in what is left")
        let read = enqueue(admission, a, "B")
        XCTAssertEqual(admission.admit(), read, "a read finds a place at once")
    }

    /// A background job's transfer does not start while a player's moves
    /// bytes (anywhere: the link is shared), and starts once none does;
    /// a scan's read is not held back (issue 54: players first).
    func testABackgroundJobsTransferWaitsWhileAPlayersMovesAndStartsWhenNoneDoes() {
        let admission = makeAdmission()
        admission.playMoving = true
        let job = enqueue(admission, a, "job", .background)
        let other = enqueue(admission, b, "job2", .background)
        let scan = enqueue(admission, a, "scan", .scan)
        XCTAssertEqual(admission.admit(), scan, "the scan's read starts, the jobs' wait")
        XCTAssertEqual(admission.admit(), [])
        admission.playMoving = false
        XCTAssertEqual(Set(admission.admit()), Set(job + other), "no player's transfer moves: the jobs start")
    }

    /// A player that reads flat out (a copy, a transcode) moves bytes for
    /// minutes: a job's transfer that has waited its patience out starts
    /// beside it; each waits its own, from when it was asked for, at each
    /// origin; a cancelled one's wait counts for no other.
    func testABackgroundJobsTransferWaitsForPlayersAtMostItsPatience() {
        let admission = makeAdmission()
        admission.backgroundPatience = TransferAdmission.backgroundPatience(readTimeout: 30)
        XCTAssertEqual(admission.backgroundPatience, 5)
        XCTAssertEqual(TransferAdmission.backgroundPatience(readTimeout: 3), 1, "a third of a short timeout")
        admission.playMoving = true
        admission.now = 100
        let job = enqueue(admission, a, "job", .background)
        admission.now = 102
        let other = enqueue(admission, b, "job2", .background)
        admission.now = 104.9
        XCTAssertEqual(admission.admit(), [], "a player moves bytes: the jobs wait")
        XCTAssertTrue(admission.waitsForPlayers(askedAt: 100))
        admission.now = 105
        XCTAssertFalse(admission.waitsForPlayers(askedAt: 100), "nor pauses for a player's reads from now")
        XCTAssertEqual(admission.admit(), job, "the first waited 5 s; the other, asked at 102, waits on")
        let later = enqueue(admission, a, "job", .background)
        admission.now = 107
        XCTAssertEqual(admission.admit(), other)
        XCTAssertEqual(admission.admit(), [], "asked at 105: its own patience")
        admission.remove(later[0])
        let cancelled = enqueue(admission, a, "job3", .background)
        admission.now = 111
        let last = enqueue(admission, a, "job4", .background)
        admission.remove(cancelled[0])
        admission.now = 115
        XCTAssertEqual(admission.admit(), [], "a cancelled transfer's wait counts for no other")
        admission.now = 116
        XCTAssertEqual(admission.admit(), last)
    }

    /// Running, a job's transfer pauses while players' reads move bytes,
    /// for at most its patience at a stretch, then moves for a turn; a gap
    /// in the players' reads starts the stretch anew; one that started
    /// overdue moves at once.
    func testARunningJobsTransferPausesForPlayersAtMostItsPatienceAtAStretchThenMovesForATurn() {
        let admission = makeAdmission()
        admission.backgroundPatience = 5
        var wait = TransferAdmission.JobWait(stalledSince: 100)
        // (now, a player's read moves bytes, the job's transfer pauses, why)
        let steps: [(Double, Bool, Bool, String)] = [
            (101, false, false, "no player's read moves: it moves"),
            (102, true, true, "a stretch from 102"),
            (106.9, true, true, "paused 4.9 s of 5"),
            (107, true, false, "paused 5 s: its turn"),
            (107.9, true, false, "within its turn"),
            (108, true, true, "its turn over: it gives way again"),
            (112, false, false, "a gap"),
            (116, true, true, "a stretch from 116, not 108"),
        ]
        for (now, reading, pauses, why) in steps {
            admission.now = now
            XCTAssertEqual(admission.jobPauses(&wait, reading: reading), pauses, "at \(now): \(why)")
        }
        var overdue = TransferAdmission.JobWait(stalledSince: 100)
        admission.now = 105
        XCTAssertFalse(admission.jobPauses(&overdue, reading: true), "asked for 5 s ago: its wait counts")
    }

    func testBackgroundCapsCountAllOriginsAndReadaheadGoesBeforePreload() {
        let admission = makeAdmission()
        let preload = enqueue(admission, a, "P", .preload, count: 3)
        let readaheadA = enqueue(admission, a, "A", .readahead, count: 3)
        let readaheadB = enqueue(admission, b, "B", .readahead, count: 3)
        let started = admission.admit()
        XCTAssertEqual(Set(started), Set(readaheadA.prefix(2) + readaheadB.prefix(2)))
        admission.remove(readaheadA[0])
        admission.remove(readaheadB[0])
        XCTAssertEqual(Set(admission.admit()), [readaheadA[2], readaheadB[2]])
        for id in [readaheadA[1], readaheadA[2], readaheadB[1], readaheadB[2]] { admission.remove(id) }
        XCTAssertEqual(admission.admit(), preload)
    }

    func testAPromotedWaitingTransferQueuesAsItsFilesReadAndFreesItsCap() {
        let admission = makeAdmission()
        let reads = enqueue(admission, a, "A", count: 8)
        let readahead = enqueue(admission, a, "B", .readahead)
        XCTAssertEqual(admission.admit(), reads)
        admission.promote(readahead[0])
        admission.remove(reads[0])
        XCTAssertEqual(admission.admit(), readahead)

        let running = enqueue(admission, b, "C", .readahead, count: 5)
        XCTAssertEqual(admission.admit(), Array(running.prefix(4)))
        admission.promote(running[0])
        XCTAssertEqual(admission.admit(), [running[4]], "a promoted running transfer no longer counts as background")
    }

    func testCancelledWaitingTransfersAreSkippedAndIdleOriginsForgotten() {
        let admission = makeAdmission()
        let reads = enqueue(admission, a, "A", count: 10)
        let probes = enqueue(admission, a, "dir", .probe, count: 200)
        XCTAssertEqual(admission.admit(), Array(reads.prefix(8)))
        admission.remove(reads[8])
        for id in probes.dropLast() { admission.remove(id) }
        for id in reads.prefix(8) { admission.remove(id) }
        XCTAssertEqual(admission.admit(), [reads[9], probes.last!])
        admission.remove(reads[9])
        admission.remove(probes.last!)
        XCTAssertEqual(admission.admit(), [])
        XCTAssertEqual(admission.originCount, 0)
    }

    func testManyQueuedTransfersAllStartOnceEach() {
        let admission = makeAdmission()
        var expected = Set<TransferID>()
        for file in 0..<1000 { expected.formUnion(enqueue(admission, a, "f\(file)", count: 50)) }
        var seen = Set<TransferID>()
        var running = admission.admit()
        while !running.isEmpty {
            XCTAssertLessThanOrEqual(running.count, 8)
            for id in running {
                XCTAssertTrue(seen.insert(id).inserted)
                admission.remove(id)
            }
            running = admission.admit()
        }
        XCTAssertEqual(seen, expected)
        XCTAssertEqual(admission.originCount, 0)
    }

    func testAHundredThousandQueuedProbesAreAdmittedUpToTheCapsAndAllStartOnceEach() {
        let admission = makeAdmission()
        let probes = Set(enqueue(admission, a, "", .probe, count: 100_000).map { $0 })
        let reads = Set(enqueue(admission, b, "B", count: 20))
        var seen = Set<TransferID>()
        var running = admission.admit()
        XCTAssertEqual(running.filter(reads.contains).count, 8, "another origin's reads are not held back")
        XCTAssertEqual(running.filter(probes.contains).count, 6, "probes up to their cap")
        while !running.isEmpty {
            for id in running {
                XCTAssertTrue(seen.insert(id).inserted)
                admission.remove(id)
            }
            running = admission.admit()
            XCTAssertLessThanOrEqual(running.filter(probes.contains).count, 6)
        }
        XCTAssertEqual(seen, probes.union(reads))
        XCTAssertEqual(admission.originCount, 0)
    }

    /// Random enqueues, promotions, cancellations and completions on two
    /// origins against the limits: after each admission no origin runs more
    /// than its places, the caps hold, and no origin with a free place
    /// leaves a read waiting, nor (with room under the caps) a probe.
    func testRandomTrafficKeepsTheLimitsAndLeavesNoAdmissibleTransferWaiting() {
        typealias Priority = FetchRequest.Priority
        struct Transfer { var origin: HTTPOrigin; var priority: Priority; var running = false }
        for seed in 0..<8 {
            var random = SplitMix64(seed: UInt64(seed))
            let admission = makeAdmission()
            var transfers: [TransferID: Transfer] = [:]
            var ids: [TransferID] = []
            func add(_ origin: HTTPOrigin, _ priority: Priority, group: String) {
                let id = enqueue(admission, origin, group, priority)[0]
                transfers[id] = Transfer(origin: origin, priority: priority)
                ids.append(id)
            }
            for i in 0..<100 { add(a, .probe, group: "f\(i)") }
            for step in 0..<800 {
                for id in admission.admit() {
                    XCTAssertEqual(transfers[id]?.running, false, "seed \(seed) step \(step): \(id) started twice")
                    transfers[id]?.running = true
                }
                let running = transfers.values.filter(\.running)
                for origin in [a, b] {
                    let here = transfers.values.filter { $0.origin == origin }
                    let busy = here.filter(\.running).count
                    XCTAssertLessThanOrEqual(busy, 8, "seed \(seed) step \(step)")
                    if busy < 8 {
                        XCTAssertFalse(here.contains { !$0.running && $0.priority == .read },
                                       "seed \(seed) step \(step): a read waits beside a free place")
                    }
                    let probes = running.filter { $0.priority == .probe }.count
                    if probes < 6 && busy < 6 && !here.contains(where: { !$0.running && $0.priority == .read }) {
                        XCTAssertFalse(here.contains { !$0.running && $0.priority == .probe },
                                       "seed \(seed) step \(step): a probe waits with room for it")
                    }
                }
                XCTAssertLessThanOrEqual(running.filter { $0.priority == .probe }.count, 6)
                XCTAssertLessThanOrEqual(running.filter { $0.priority >= .readahead }.count, 4)
                ids.removeAll { transfers[$0] == nil }
                guard let id = ids.isEmpty ? nil : ids[Int(random.next() % UInt64(ids.count))] else { continue }
                switch random.next() % 10 {
                case 0..<3:
                    admission.promote(id)
                    transfers[id]?.priority = .read
                case 3..<7 where transfers[id]!.running, 7:
                    admission.remove(id)
                    transfers[id] = nil
                default:
                    let priorities: [Priority] = [.read, .probe, .readahead, .preload]
                    add(random.next() % 2 == 0 ? a : b, priorities[Int(random.next() % 4)],
                        group: "g\(random.next() % 6)")
                }
            }
        }
    }
}


/// A library scan's reads: behind a player's waiting reads and its
/// readahead at the origin, in what reads leave, with no mount-wide cap.
final class ScanAdmissionTests: XCTestCase {
    let a = HTTPOrigin(url: "http://media.example:8080/")!
    var nextID: TransferID = 1

    func enqueue(_ admission: TransferAdmission, _ group: String, _ priority: FetchRequest.Priority,
                 count: Int = 1) -> [TransferID] {
        (0..<count).map { _ in
            let id = nextID
            nextID += 1
            admission.enqueue(id, origin: a, group: group, priority: priority)
            return id
        }
    }

    func testAScansReadsWaitBehindAPlayersReadsAndReadahead() {
        let admission = TransferAdmission(perOrigin: 8, readReserve: 2, maxProbes: 6, maxBackground: 4)
        let scans = enqueue(admission, "probed.mkv", .scan, count: 10)
        let first = admission.admit()
        XCTAssertEqual(first, Array(scans.prefix(6)), "6 of 8 places: 2 stay for players' reads")
        let reads = enqueue(admission, "film.mkv", .read, count: 3)
        let ahead = enqueue(admission, "film.mkv", .readahead)
        XCTAssertEqual(admission.admit(), Array(reads.prefix(2)), "the free places go to the player")
        for id in first.prefix(3) { admission.remove(id) }
        XCTAssertEqual(admission.admit(), [reads[2]], "a player's read waits: nothing else starts")
        XCTAssertEqual(admission.admit(), [])
        // With no player's read waiting, its readahead goes before the scan.
        admission.remove(reads[0])
        admission.remove(reads[1])
        let next = admission.admit()
        XCTAssertEqual(next.first, ahead[0], "readahead before the scan's reads")
        XCTAssertEqual(Array(next.dropFirst()), [scans[6]], "then the scan, up to 6 running")
    }

    func testAScansReaderLiftsAPreloadToAScansPlaceNotAReads() {
        let admission = TransferAdmission(perOrigin: 8, readReserve: 2, maxProbes: 6, maxBackground: 0)
        let preload = enqueue(admission, "next.mkv", .preload)
        XCTAssertEqual(admission.admit(), [], "no background cap left")
        admission.promote(preload[0], to: .scan)
        XCTAssertEqual(admission.admit(), preload, "a scan's place is not under the background cap")
        admission.promote(preload[0], to: .readahead)
        let reads = enqueue(admission, "film.mkv", .read, count: 8)
        XCTAssertEqual(admission.admit().count, 7, "a running scan keeps its place")
        _ = reads
    }
}
