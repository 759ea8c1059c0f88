// The class of each job a media server runs, from its real command line
// (Jellyfin 10.10/10.11's, Plex's, intro-skipper's), under a parent named
// like the server; the user's rules first; `--reader-class` text parsed
// or refused with what was wrong.
import XCTest
@testable import MediaCache
@testable import MediaSupport
@testable import MediaTestSupport

final class ReaderRuleTests: XCTestCase {
    typealias FakeTable = ProcessClassifierTests.FakeTable

    /// Jellyfin starts each job as its child; the class each gets.
    static let jellyfinJobs: [(String, [String], ReadClass)] = [
        ("ffprobe", ["ffprobe", "-analyzeduration", "200M", "-probesize", "1G", "-i", "file:/m/a.mkv", "-threads", "0",
                     "-v", "warning", "-print_format", "json", "-show_streams", "-show_chapters", "-show_format"], .scan),
        ("ffmpeg", ["ffmpeg", "-i", "file:/m/a.mkv", "-copyts", "-map", "0:2", "-an", "-vn", "-c:s", "srt",
                    "/var/lib/jellyfin/data/subtitles/ab/abc.srt"], .background),
        ("ffmpeg", ["ffmpeg", "-dump_attachment:t", "", "-y", "-i", "file:/m/a.mkv", "-t", "0", "-f", "null", "null"], .play),
        ("ffmpeg", ["ffmpeg", "-loglevel", "error", "-skip_frame", "nokey", "-threads", "1", "-i", "file:/m/a.mkv",
                    "-an", "-sn", "-vf", "fps=0.1,scale=320:-1", "-c:v", "mjpeg", "-f", "image2",
                    "/tmp/jf/guid/%08d.jpg"], .background),
        ("ffmpeg", ["ffmpeg", "-threads", "1", "-i", "file:/m/a.mkv", "-an", "-sn", "-vf", "fps=1/10,scale=320:-1",
                    "-f", "image2", "/tmp/jf/guid/%08d.jpg"], .background),
        ("ffmpeg", ["ffmpeg", "-ss", "00:00:04.800", "-i", "file:/m/a.mkv", "-threads", "0", "-v", "quiet",
                    "-vframes", "1", "-f", "image2", "/tmp/jf/primary.jpg"], .scan),
        ("ffprobe", ["ffprobe", "-loglevel", "error", "-skip_frame", "nokey", "-select_streams", "v:0",
                     "-show_entries", "packet=pts_time,flags", "-of", "csv", "/m/a.mkv"], .background),
        ("ffmpeg", ["ffmpeg", "-hide_banner", "-i", "/m/song.flac", "-af", "ebur128=framelog=verbose", "-f", "null",
                    "-"], .background),
        ("ffmpeg", ["ffmpeg", "-hide_banner", "-threads", "1", "-ss", "0", "-i", "/m/e1.mkv", "-to", "600", "-ac", "2",
                    "-f", "chromaprint", "-fp_format", "raw", "-"], .background),
        ("ffmpeg", ["ffmpeg", "-hide_banner", "-ss", "0", "-i", "/m/e1.mkv", "-to", "600", "-af",
                    "silencedetect=noise=-50dB:duration=0.33", "-f", "null", "-"], .background),
        ("ffmpeg", ["ffmpeg", "-hide_banner", "-ss", "0", "-i", "/m/e1.mkv", "-to", "600", "-an", "-dn", "-sn", "-vf",
                    "blackframe=amount=50", "-f", "null", "-"], .background),
        ("ffmpeg", ["ffmpeg", "-analyzeduration", "200M", "-probesize", "1G", "-ss", "00:10:00", "-i", "file:/m/a.mkv",
                    "-map_metadata", "-1", "-map_chapters", "-1", "-threads", "0", "-map", "0:0", "-map", "0:1",
                    "-codec:v:0", "libx264", "-f", "hls", "-hls_time", "6", "-hls_segment_filename",
                    "/var/lib/jellyfin/transcodes/x%d.ts", "/var/lib/jellyfin/transcodes/x.m3u8"], .play),
    ]

    func testJellyfinsJobs_eachInTheClassTheManPageGives() {
        let table = FakeTable()
        table.set(1000, "jellyfin", start: 1)
        for (index, (name, arguments, expected)) in Self.jellyfinJobs.enumerated() {
            let pid = Int32(1001 + index)
            table.set(pid, name, parent: 1000, start: 2)
            table.arguments[pid] = arguments
            let reader = ProcessClassifier(table: table).reader(thread: pid)
            XCTAssertEqual(reader.readClass, expected, arguments.joined(separator: " "))
            XCTAssertEqual(reader.readsAhead, expected == .play || arguments.contains("-vframes"),
                           "only a player, or a frame's extraction, reads ahead: \(arguments)")
            if expected == .background { XCTAssertNotNil(reader.rule, "a background job says which rule") }
        }
    }

    func testPlexsJobs() {
        let table = FakeTable()
        table.set(10, "Plex Media Server", start: 1)
        table.set(11, "Plex Transcoder", parent: 10, start: 2)
        table.arguments[11] = ["/usr/lib/plexmediaserver/Plex Transcoder", "-skip_frame:v", "nokey", "-i", "/m/a.mkv",
                               "-q", "3", "-filter_complex", "[0:0]scale=w=320:h=240[0]", "-f", "image2", "x%d.jpg"]
        table.set(12, "Plex Media Scanner", parent: 10, start: 2)
        table.arguments[12] = ["/usr/lib/plexmediaserver/Plex Media Scanner", "--analyze-deeply", "--item", "42"]
        table.set(13, "Plex Media Scanner", parent: 10, start: 2)
        table.arguments[13] = ["/usr/lib/plexmediaserver/Plex Media Scanner", "--scan", "--section", "1"]
        table.set(14, "Plex Transcoder", parent: 10, start: 2)
        table.arguments[14] = ["/usr/lib/plexmediaserver/Plex Transcoder", "-i", "/m/a.mkv", "-progressurl",
                               "http://127.0.0.1:32400/video/:/transcode/session/x/progress", "-f", "dash", "out"]
        let classifier = ProcessClassifier(table: table)
        XCTAssertEqual(classifier.classify(thread: 11), .background, "preview thumbnails")
        XCTAssertEqual(classifier.classify(thread: 12), .background, "deep analysis")
        XCTAssertEqual(classifier.classify(thread: 13), .scan, "a scan is a scan")
        XCTAssertEqual(classifier.classify(thread: 14), .play, "a viewer's transcode")
    }

    func testTheUsersRulesComeFirst_byNameAndWordsOrByParent() throws {
        let table = FakeTable()
        table.set(1, "tdarr", start: 1)
        table.set(2, "ffmpeg", parent: 1, start: 1)
        table.arguments[2] = ["ffmpeg", "-i", "/m/a.mkv", "-c:v", "libx265", "out.mkv"]
        table.set(3, "ffmpeg", parent: 99, start: 1)
        table.arguments[3] = ["ffmpeg", "-i", "/m/a.mkv", "-af", "ebur128", "-f", "null", "-"]
        let rules = try [ReaderRule.parse("parent:tdarr=background").get(), ReaderRule.parse("* ebur128=play").get()]
        let classifier = ProcessClassifier(rules: rules, table: table)
        XCTAssertEqual(classifier.classify(thread: 2), .background)
        XCTAssertEqual(classifier.classify(thread: 3), .play, "the user's rule wins over the default")
        XCTAssertEqual(classifier.reader(thread: 3).rule, "--reader-class * ebur128=play")
        XCTAssertEqual(ProcessClassifier(table: table).classify(thread: 3), .background)
        XCTAssertEqual(ProcessClassifier(scanners: [], rules: rules, table: table).classify(thread: 2), .background,
                       "a rule alone turns read classes on")
    }

    func testRuleText_parsedOrRefusedWithWhatWasWrong() {
        XCTAssertEqual(try ReaderRule.parse("ffmpeg -f chromaprint=background").get(),
                       ReaderRule(name: "ffmpeg", words: ["-f", "chromaprint"], readClass: .background,
                                  reason: "--reader-class ffmpeg -f chromaprint=background"))
        XCTAssertEqual(try ReaderRule.parse("Plex Media Scanner=scan").get().name, "Plex")
        for (text, wrong) in [("ffmpeg", "no '=CLASS'"), ("ffmpeg=fast", "'fast' is not a class"),
                              ("=play", "no process name"), ("parent:=play", "'parent:' needs a name")] {
            switch ReaderRule.parse(text) {
            case .success(let rule): XCTFail("\(text) parsed as \(rule)")
            case .failure(let error): XCTAssertTrue(error.message.contains(wrong), "\(text): \(error.message)")
            }
        }
    }
}
