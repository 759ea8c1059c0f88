// The class of the process behind an open, from a fake /proc: names as the
// kernel cuts them, a scanner's helpers through their parents (a bounded
// walk), a reused pid classified again, `--scanners` text, and /proc's
// stat line parsed from the last parenthesis, and a one-frame extraction
// and a start past the file's start told by its arguments.
import XCTest
@testable import MediaCache
@testable import MediaSources
@testable import MediaSegmented
@testable import MediaSupport
@testable import MediaTestSupport

final class ProcessClassifierTests: XCTestCase {
    /// A process table the test edits; counts the stat reads.
    final class FakeTable: ProcessTable, @unchecked Sendable {
        struct Process { var name: String; var parent: Int32; var start: UInt64 }
        let lock = NSLock()
        var processes: [Int32: Process] = [:]
        var threads: [Int32: Int32] = [:]
        var arguments: [Int32: [String]] = [:]
        var nameReads = 0

        func set(_ pid: Int32, _ name: String, parent: Int32 = 1, start: UInt64) {
            lock.withLock { processes[pid] = Process(name: name, parent: parent, start: start) }
        }

        func process(ofThread id: Int32) -> Int32? { lock.withLock { threads[id] ?? (processes[id] != nil ? id : nil) } }
        func name(of pid: Int32) -> String? {
            lock.withLock {
                nameReads += 1
                return processes[pid].map { ProcessClassifier.comm($0.name) }
            }
        }
        func stat(of pid: Int32) -> ProcessStat? {
            lock.withLock { processes[pid].map { ProcessStat(parent: $0.parent, startTime: $0.start) } }
        }
        func arguments(of pid: Int32) -> [String]? { lock.withLock { arguments[pid] } }
    }

    func testAOneFrameExtractionIsAScanAndAStreamPlays() {
        let table = FakeTable()
        // Jellyfin's image extraction and its direct stream: both a plain
        // ffmpeg, both the server's children.
        table.set(40, "jellyfin", start: 1)
        table.set(41, "ffmpeg", parent: 40, start: 2)
        table.arguments[41] = ["/usr/lib/jellyfin-ffmpeg/ffmpeg", "-ss", "00:00:04.800", "-i", "file:/m/a.mkv",
                               "-threads", "0", "-v", "quiet", "-vframes", "1", "-vf", "scale=trunc(iw/2)*2:trunc(ih/2)*2",
                               "-f", "image2", "/tmp/x.jpg"]
        table.set(42, "ffmpeg", parent: 40, start: 2)
        table.arguments[42] = ["ffmpeg", "-i", "file:/m/a.mkv", "-map", "0", "-c", "copy", "-f", "mpegts", "pipe:1"]
        table.set(43, "ffmpeg", start: 2)
        table.arguments[43] = ["ffmpeg", "-i", "/m/a.mkv", "-frames:v", "1", "thumb.png"]
        table.set(44, "ffmpeg", start: 2)
        table.arguments[44] = ["ffmpeg", "-i", "/m/a.mkv", "-frames:v", "100", "clip.mp4"]
        table.set(45, "ffmpeg", start: 2)
        table.arguments[45] = ["ffmpeg", "-i", "/m/a.mkv", "-vframes"]
        let classifier = ProcessClassifier(table: table)
        XCTAssertEqual(classifier.classify(thread: 41), .scan, "-vframes 1: a thumbnail")
        XCTAssertEqual(classifier.classify(thread: 42), .play, "a remux streams")
        XCTAssertEqual(classifier.classify(thread: 43), .scan, "-frames:v 1")
        XCTAssertEqual(classifier.classify(thread: 44), .play, "a hundred frames are a clip")
        XCTAssertEqual(classifier.classify(thread: 45), .play, "an option with no value")
        let extraction = classifier.reader(thread: 41)
        XCTAssertEqual([extraction.readClass == .scan, extraction.readsAhead, extraction.startsElsewhere], [true, true, true],
                       "a scan's bytes that read ahead, at 4.8 s")
        var remux = Reader.player
        remux.streamsFromLookup = true
        remux.readsAfterLookup = true
        XCTAssertEqual(classifier.reader(thread: 42).of(nil), remux, "a player, known by name: its lookup streams")
        table.set(46, "ffprobe", start: 2)
        table.arguments[46] = ["ffprobe", "-read_intervals", "%+#1", "-frames", "1", "/m/a.mkv"]
        var scanner = Reader.scanner
        scanner.readsAfterLookup = true
        XCTAssertEqual(classifier.reader(thread: 46).of(nil), scanner, "a scanner by name reads only what it asks")
        XCTAssertEqual(ProcessClassifier(scanners: [], table: table).classify(thread: 41), .play,
                       "read classes off: no scans at all")
        // The real /proc: this test runner's own arguments are read.
        XCTAssertEqual(ProcFileSystem().arguments(of: getpid())?.first?.isEmpty, false)
    }

    /// A player asked to start past the file's start (decision 0059):
    /// ffmpeg's input seek in Jellyfin's form and the plain one, from the
    /// end, ffplay's (no `-i`), mpv's and VLC's start options; not a seek
    /// to zero, nor ffmpeg's output seek (after the last `-i`: it reads
    /// from the start), nor an option with no value.
    func testAPlayerAskedToStartPastTheStartIsToldByItsArguments() {
        let starts: [[String]] = [
            ["ffmpeg", "-analyzeduration", "200M", "-ss", "00:01:30.000", "-noaccurate_seek", "-i", "file:/m/a.mkv",
             "-c", "copy", "-f", "mpegts", "pipe:1"],
            ["ffmpeg", "-nostdin", "-ss", "40", "-i", "/m/a.mp4", "-t", "1", "-f", "null", "-"],
            ["ffmpeg", "-sseof", "-10", "-i", "/m/a.mp4", "-f", "null", "-"],
            ["ffmpeg", "-sseof", "0", "-i", "/m/a.mp4", "-f", "null", "-"],
            ["ffplay", "-ss", "40", "/m/a.mkv"],
            ["mpv", "--start=+40", "/m/a.mkv"],
            ["mpv", "--start", "50%", "/m/a.mkv"],
            ["vlc", "--start-time=12.5", "/m/a.mkv"],
        ]
        let fromTheStart: [[String]] = [
            ["ffmpeg", "-ss", "00:00:00.000", "-i", "/m/a.mkv", "-f", "null", "-"],
            ["ffmpeg", "-ss", "0", "-i", "/m/a.mkv", "-f", "null", "-"],
            ["ffmpeg", "-i", "/m/a.mkv", "-ss", "40", "-f", "null", "-"],
            ["ffmpeg", "-i", "/m/a.mkv", "-ss"],
            ["ffplay", "/m/a.mkv"],
            ["mpv", "--start=0", "/m/a.mkv"],
            ["mpv", "/m/40.mkv", "--start"],
            ["cat", "/m/a.mkv"],
        ]
        for arguments in starts {
            XCTAssertTrue(ProcessClassifier.startsElsewhere(arguments), "\(arguments)")
        }
        for arguments in fromTheStart {
            XCTAssertFalse(ProcessClassifier.startsElsewhere(arguments), "\(arguments)")
        }
        // Told through the classifier, read classes on or off; a pattern
        // made of the reader keeps it.
        let table = FakeTable()
        table.set(60, "ffmpeg", start: 1)
        table.arguments[60] = starts[1]
        table.set(61, "ffmpeg", start: 1)
        table.arguments[61] = fromTheStart[2]
        for scanners in [ProcessClassifier.defaultScanners, []] {
            let classifier = ProcessClassifier(scanners: scanners, table: table)
            XCTAssertTrue(classifier.reader(thread: 60).startsElsewhere, "scanners \(scanners)")
            XCTAssertTrue(ReadPattern(classifier.reader(thread: 60)).startsElsewhere)
            XCTAssertFalse(classifier.reader(thread: 61).startsElsewhere)
            XCTAssertEqual(classifier.classify(thread: 60), .play)
        }
    }

    /// A known player that plays from the start streams from its lookup
    /// (decision 0061): not one that starts elsewhere, a thumbnail's
    /// ffmpeg, a scanner, nor a program read classes take for a player
    /// only by default (`cat`, `ls`: `ls -l` looks up and opens nothing).
    /// Any known player or scanner by name reads what it looks up
    /// (decision 0062): a VOD's lookup brings its heads for it.
    func testAKnownPlayerFromTheStartStreamsFromItsLookup() {
        let table = FakeTable()
        let cases: [(name: String, arguments: [String], streams: Bool, reads: Bool)] = [
            ("ffmpeg", ["ffmpeg", "-nostdin", "-i", "/m/a.mp4", "-t", "3", "-f", "null", "-"], true, true),
            ("ffmpeg", ["ffmpeg", "-ss", "90", "-i", "/m/a.mp4", "-t", "1", "-f", "null", "-"], false, true),
            ("ffmpeg", ["ffmpeg", "-i", "/m/a.mkv", "-vframes", "1", "x.jpg"], false, true),
            ("mpv", ["mpv", "/m/a.mkv"], true, true),
            ("Plex Transcoder", ["Plex Transcoder", "-i", "/m/a.mkv"], true, true),
            ("ffprobe", ["ffprobe", "/m/a.mkv"], false, true),
            ("cat", ["cat", "/m/a.mkv"], false, false),
            ("ls", ["ls", "-l", "/m"], false, false),
        ]
        for (index, (name, arguments, _, _)) in cases.enumerated() {
            table.set(Int32(70 + index), name, start: 1)
            table.arguments[Int32(70 + index)] = arguments
        }
        let classifier = ProcessClassifier(table: table)
        for (index, (_, arguments, streams, reads)) in cases.enumerated() {
            let reader = classifier.reader(thread: Int32(70 + index))
            XCTAssertEqual(reader.streamsFromLookup, streams, "\(arguments)")
            XCTAssertEqual(reader.readsAfterLookup, reads, "\(arguments)")
        }
    }

    /// Every reader is named, read classes on or off: its pid, start time,
    /// name, short command line and parent's name; nothing for a process
    /// that is gone.
    func testTheReaderNamesItsProcess_readClassesOnOrOff() {
        let table = FakeTable()
        table.set(50, "jellyfin", start: 1)
        table.set(51, "ffmpeg", parent: 50, start: 7)
        table.threads[52] = 51
        table.arguments[51] = ["/usr/lib/jellyfin-ffmpeg/ffmpeg", "-i", "file:/m/a.mkv", "-f", "null", "-"]
        let expected = ReaderProcess(pid: 51, startTime: 7, name: "ffmpeg", arguments: "ffmpeg -i file:/m/a.mkv -f null -",
                                     parentName: "jellyfin")
        for scanners in [ProcessClassifier.defaultScanners, []] {
            let reader = ProcessClassifier(scanners: scanners, table: table).reader(thread: 52)
            XCTAssertEqual(reader.process, expected, "scanners \(scanners)")
            XCTAssertEqual(reader.readClass, .play)
        }
        XCTAssertNil(ProcessClassifier(table: table).reader(thread: 999).process)
    }

    func testKnownScannersAreScansAndEverythingElsePlays() {
        let table = FakeTable()
        table.set(100, "ffprobe", start: 1)
        table.set(101, "mpv", start: 1)
        table.set(102, "Plex Media Scanner", start: 1)
        table.set(103, "cat", start: 1)
        let classifier = ProcessClassifier(table: table)
        XCTAssertEqual(classifier.classify(thread: 100), .scan)
        XCTAssertEqual(classifier.classify(thread: 101), .play)
        XCTAssertEqual(classifier.classify(thread: 102), .scan, "the kernel keeps 15 bytes: 'Plex Media Scan'")
        XCTAssertEqual(classifier.classify(thread: 103), .play)
        XCTAssertEqual(classifier.classify(thread: 999), .play, "a process that is gone plays")
        XCTAssertEqual(classifier.classify(thread: 0), .play)
    }

    func testAThreadIsClassifiedByItsProcessNotItsOwnName() {
        let table = FakeTable()
        table.set(200, "ffprobe", start: 5)
        // ffmpeg names its threads (pthread_setname_np): "dec0:0:h264".
        table.threads[201] = 200
        XCTAssertEqual(ProcessClassifier(table: table).classify(thread: 201), .scan)
    }

    func testAScannersHelpersAreScansUpToTheBoundOfTheWalk() {
        let table = FakeTable()
        table.set(10, "Plex Media Scanner", start: 1)
        table.set(11, "sh", parent: 10, start: 2)
        table.set(12, "ffmpeg", parent: 11, start: 3)
        // A chain longer than the walk: the scanner is 5 ancestors up.
        table.set(20, "mediainfo", start: 1)
        var parent: Int32 = 20
        for pid in Int32(21)...25 {
            table.set(pid, "sh", parent: parent, start: 4)
            parent = pid
        }
        // A loop in the table (a lying /proc) ends too.
        table.set(30, "x", parent: 31, start: 1)
        table.set(31, "y", parent: 30, start: 1)
        let classifier = ProcessClassifier(table: table)
        XCTAssertEqual(classifier.classify(thread: 12), .scan, "ffmpeg spawned by the scanner's shell")
        XCTAssertEqual(classifier.classify(thread: 24), .scan, "4 ancestors up: within the walk")
        XCTAssertEqual(classifier.classify(thread: 25), .play, "5 ancestors up: past the walk")
        XCTAssertEqual(classifier.classify(thread: 30), .play)
        XCTAssertEqual(ProcessClassifier.maxAncestors, 4)
    }

    func testAReusedPidIsClassifiedAgainNotInherited() {
        let table = FakeTable()
        table.set(300, "ffprobe", start: 1_000)
        let classifier = ProcessClassifier(table: table)
        XCTAssertEqual(classifier.classify(thread: 300), .scan)
        let reads = table.nameReads
        XCTAssertEqual(classifier.classify(thread: 300), .scan)
        XCTAssertEqual(table.nameReads, reads, "the same process is answered from the cache")
        // The scanner exits; the kernel gives its pid to a player.
        table.set(300, "mpv", start: 2_000)
        XCTAssertEqual(classifier.classify(thread: 300), .play, "a new start time: classified again")
        table.set(300, "ffprobe", start: 3_000)
        XCTAssertEqual(classifier.classify(thread: 300), .scan)
    }

    func testScannersTextAddsOrReplaces() {
        XCTAssertEqual(ProcessClassifier.scanners(from: "probe-x,Jellyfin Scan"),
                       ProcessClassifier.defaultScanners + ["probe-x", "Jellyfin Scan"])
        XCTAssertEqual(ProcessClassifier.scanners(from: "=probe-x"), ["probe-x"])
        XCTAssertEqual(ProcessClassifier.scanners(from: "="), [])
        XCTAssertNil(ProcessClassifier.scanners(from: "a,,b"))
        XCTAssertNil(ProcessClassifier.scanners(from: ""))
        XCTAssertNil(ProcessClassifier.scanners(from: String(repeating: "x", count: 256)))

        let table = FakeTable()
        table.set(1, "ffprobe", start: 1)
        table.set(2, "probe-x", start: 1)
        let replaced = ProcessClassifier(scanners: ["probe-x"], table: table)
        XCTAssertEqual(replaced.classify(thread: 1), .play, "replaced: ffprobe is not a scanner any more")
        XCTAssertEqual(replaced.classify(thread: 2), .scan)
        let none = ProcessClassifier(scanners: [], table: table)
        XCTAssertFalse(none.classifies)
        XCTAssertEqual(none.classify(thread: 2), .play)
    }

    func testTheStatLineIsReadFromTheLastParenthesisAndBounded() {
        let line = "4242 (a (b) c) S 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1 2 3\n"
        XCTAssertEqual(ProcFileSystem.parseStat(line), ProcessStat(parent: 17, startTime: 987654))
        XCTAssertNil(ProcFileSystem.parseStat("4242 (x) S 17 1 2"), "too few fields")
        XCTAssertNil(ProcFileSystem.parseStat("4242 (x) S 99999999999 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 5 1"),
                     "a parent past the kernel's pids")
        XCTAssertNil(ProcFileSystem.parseStat("4242 (x) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 "
                                               + "99999999999999999999999 1"), "a start time past 64 bits")
        XCTAssertNil(ProcFileSystem.parseStat("no parenthesis"))
        // This process, from the real /proc.
        let me = getpid()
        let table = ProcFileSystem()
        XCTAssertEqual(table.process(ofThread: me), me)
        XCTAssertNotNil(table.stat(of: me))
        XCTAssertEqual(table.stat(of: me)?.parent, getppid())
        XCTAssertNotNil(table.name(of: me))
    }
}
