// Seeded fuzzing of every parser that reads text from outside: response heads,
// HTTP dates, cache metadata, playlists, directory listings, list and config
// files, sizes and durations. No input may trap, and whatever parses must lie
// within Limits. Each test replays exactly from its seed.
import Foundation
import XCTest
@testable import MediaCache
@testable import MediaSources
@testable import MediaSegmented
@testable import MediaStore
@testable import MediaNetwork
@testable import MediaSupport
#if canImport(Glibc)
import Glibc
@testable import MediaTestSupport
#endif

final class ParserFuzzTests: XCTestCase {
    private var base = ""

    override func setUpWithError() throws {
        base = try TemporaryDirectory.make("fuzz")
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: base)
    }

    // MARK: Response heads

    private func headerLine(_ input: inout FuzzInput) -> String {
        let line: String
        switch input.below(8) {
        case 0: line = "HTTP/1.1 \(input.pick(["200", "206", "416", "503", input.number()])) OK"
        case 1: line = "Content-Length: \(input.number())"
        case 2:
            // Mostly plausible, so enough parse for the bounds to be tested.
            let first = input.chance(3) ? input.number() : String(input.below(1000))
            let last = input.chance(3) ? input.number() : String(1000 + input.below(1000))
            let total = input.chance(3) ? "*" : input.chance(3) ? input.number() : String(2000 + input.below(1000))
            line = "Content-Range: bytes \(first)-\(last)/\(total)"
        case 3: line = "Content-Range: bytes */\(input.number())"
        case 4: line = "Retry-After: \(input.chance(3) ? date(&input) : input.number())"
        case 5: line = "Last-Modified: \(date(&input))"
        case 6: line = input.pick(["ETag: \"x\"", "Accept-Ranges: bytes", "Content-Type: video/mp4"])
        default: line = input.garbage()
        }
        return input.chance(3) ? input.mutate(line) : line
    }

    func testResponseHead_fromHostileHeaderLines_neverTrapsAndKeepsEveryNumberInBounds() {
        var input = FuzzInput(seed: 0x4845_4144)
        let known = ContentInfo(length: 1000, etag: nil, lastModified: "Tue, 01 Oct 2024 10:00:00 GMT")
        var ranges = 0
        for step in 0..<6000 {
            var head = ResponseHead(status: 0, headers: [:])
            if !input.chance(4) { head.add(line: Substring(input.pick(["HTTP/1.1 200 OK", "HTTP/1.1 206 Partial", "HTTP/2 416"]))) }
            for _ in 0..<(1 + input.below(6)) { head.add(line: Substring(headerLine(&input))) }
            let context = "step \(step): \(head)"

            XCTAssertTrue(head.status == 0 || (100...999).contains(head.status), context)
            if let length = head.contentLength { XCTAssertTrue(Limits.isLength(length), context) }
            if let answer = head.contentRange {
                ranges += 1
                XCTAssertTrue(answer.range.lowerBound >= 0 && !answer.range.isEmpty, context)
                XCTAssertLessThanOrEqual(answer.range.upperBound, answer.total ?? Limits.maxLength, context)
                if let total = answer.total { XCTAssertTrue(Limits.isLength(total), context) }
            }
            if let total = head.unsatisfiedRangeTotal { XCTAssertTrue(Limits.isLength(total), context) }
            if let wait = head.retryAfterSeconds(now: Clock.system.wall()) { XCTAssertTrue((0...Limits.maxRetryAfter).contains(wait), context) }
            if let seconds = head.lastModified.flatMap(HTTPDate.seconds) {
                XCTAssertTrue(Limits.unixSeconds.contains(Int64(seconds)), context)
            }
            if let info = ContentProbe.info(from: head) { XCTAssertTrue(Limits.isLength(info.length), context) }
            _ = head.failure
            _ = ChangeDetection.inHead(head, against: known)
        }
        XCTAssertGreaterThan(ranges, 100, "too few inputs parsed as a Content-Range to test its bounds")
    }

    // MARK: HTTP dates

    private static let weekdays = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    private func date(_ input: inout FuzzInput) -> String {
        func field(_ valid: Int, _ width: Int) -> String {
            if input.chance(4) { return input.number() }
            let digits = String(valid)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        let text = "\(input.pick(Self.weekdays)), \(field(1 + input.below(31), 2)) \(input.pick(Self.months)) "
            + "\(field(input.below(10_001), 4)) \(field(input.below(24), 2)):\(field(input.below(60), 2)):"
            + "\(field(input.below(61), 2)) GMT"
        return input.chance(3) ? input.mutate(text) : text
    }

    func testHTTPDate_ofHostileFields_isNilOrWithinYears1To9999() {
        var input = FuzzInput(seed: 0x4441_5445)
        var parsed = 0
        for step in 0..<20_000 {
            let text = date(&input)
            guard let seconds = HTTPDate.seconds(text) else { continue }
            parsed += 1
            XCTAssertTrue(Limits.unixSeconds.contains(Int64(seconds)), "step \(step): '\(text)' gave \(seconds)")
        }
        XCTAssertGreaterThan(parsed, 1000, "too few dates parsed to test their bounds")
    }

    func testHTTPDate_ofValidDates_agreesWithFoundationsCalendar() throws {
        var input = FuzzInput(seed: 0x4341_4c45)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = try XCTUnwrap(TimeZone(identifier: "UTC"))
        for _ in 0..<2000 {
            // Foundation switches to the Julian calendar before 1582; HTTP dates never do.
            let parts = DateComponents(year: 1600 + input.below(8400), month: 1 + input.below(12), day: 1 + input.below(28),
                                       hour: input.below(24), minute: input.below(60), second: input.below(60))
            let expected = Int(try XCTUnwrap(calendar.date(from: parts)).timeIntervalSince1970)
            let text = String(format: "Sun, %02d %@ %04d %02d:%02d:%02d GMT", parts.day!, Self.months[parts.month! - 1],
                              parts.year!, parts.hour!, parts.minute!, parts.second!)
            XCTAssertEqual(HTTPDate.seconds(text), expected, text)
        }
        XCTAssertEqual(HTTPDate.seconds("Mon, 01 Jan 0001 00:00:00 GMT").map(Int64.init), Limits.unixSeconds.lowerBound)
        XCTAssertEqual(HTTPDate.seconds("Fri, 31 Dec 9999 23:59:59 GMT").map(Int64.init), Limits.unixSeconds.upperBound)
        // Month names in any case; a field that only looks like one is not.
        XCTAssertEqual(HTTPDate.seconds("Sun, 06 NOV 1994 08:49:37 GMT"), 784_111_777)
        XCTAssertEqual(HTTPDate.seconds("Sun, 06 nov 1994 08:49:37 GMT"), 784_111_777)
        XCTAssertNil(HTTPDate.seconds("Sun, 06 N\u{00F6}v 1994 08:49:37 GMT"))
        XCTAssertNil(HTTPDate.seconds("Sun, 06 Nov 1994 08:49:37 gmt"))
    }

    // MARK: Cache metadata

    private func randomMeta(_ input: inout FuzzInput) -> EntryMeta {
        let length = Int64(input.below(1 << 20))
        var present = ByteRangeSet()
        for _ in 0..<input.below(5) where length > 0 {
            let start = Int64(input.below(Int(length)))
            present.insert(start..<min(length, start + 1 + Int64(input.below(100_000))))
        }
        return EntryMeta(url: "https://h.example/\(input.below(1000)).mp4",
                         info: ContentInfo(length: length, contentType: input.chance(2) ? "video/mp4" : nil,
                                           etag: input.chance(2) ? "\"e\(input.below(99))\"" : nil,
                                           lastModified: input.chance(2) ? date(&input) : nil,
                                           acceptsRanges: input.chance(2)),
                         present: present, lastAccess: Int64(input.below(2_000_000_000)),
                         lastValidated: Int64(input.below(2_000_000_000)))
    }

    /// FNV-1a as MetaFormat computes it (its pinned test checks the algorithm),
    /// so a mutated field can be re-signed and reach the bounds checks.
    private func signed(_ body: String) -> [UInt8] {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in body.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return Array((body + "checksum " + String(repeating: "0", count: 16 - hex.count) + hex + "\n").utf8)
    }

    func testMetaDecode_ofMutatedEncodings_failsOrGivesAnEntryWithinBounds() {
        var input = FuzzInput(seed: 0x4d45_5441)
        var accepted = 0, refused = 0
        for step in 0..<4000 {
            let meta = randomMeta(&input)
            let encoded = String(decoding: MetaFormat.encode(meta), as: UTF8.self)
            var lines = encoded.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            let bytes: [UInt8]
            switch input.below(3) {
            case 0:
                // Raw damage: the checksum should catch nearly all of it.
                bytes = Array(input.mutate(encoded).utf8)
            case 1:
                // One field's value replaced and the file re-signed.
                let index = 1 + input.below(lines.count - 3)
                let key = lines[index].prefix(while: { $0 != " " })
                lines[index] = key + " " + (input.chance(2) ? input.number() : input.mutate(String(lines[index].dropFirst(key.count + 1))))
                bytes = signed(lines[..<(lines.count - 2)].joined(separator: "\n") + "\n")
            default:
                // Whole-field extremes, honestly encoded.
                var hostile = meta
                hostile.info.length = input.pick([Limits.maxLength, Limits.maxLength + 1, Int64.max, meta.info.length])
                hostile.lastAccess = input.pick([Int64.min, Int64.max, Limits.unixSeconds.upperBound + 1, meta.lastAccess])
                hostile.lastValidated = input.pick([Int64.min, Limits.unixSeconds.lowerBound - 1, meta.lastValidated])
                if input.chance(2) { hostile.present = ByteRangeSet([0..<hostile.info.length]) }
                bytes = MetaFormat.encode(hostile)
            }
            let context = "step \(step): \(String(decoding: bytes, as: UTF8.self))"
            guard let decoded = try? MetaFormat.decode(bytes) else { refused += 1; continue }
            accepted += 1
            XCTAssertTrue(Limits.isLength(decoded.info.length), context)
            XCTAssertTrue(Limits.unixSeconds.contains(decoded.lastAccess), context)
            XCTAssertTrue(Limits.unixSeconds.contains(decoded.lastValidated), context)
            XCTAssertLessThanOrEqual(decoded.present.ranges.last?.upperBound ?? 0, decoded.info.length, context)
            XCTAssertEqual(try? MetaFormat.decode(MetaFormat.encode(decoded)), decoded, context)
        }
        XCTAssertGreaterThan(accepted, 300, "too few mutations decoded to test what decode lets through")
        XCTAssertGreaterThan(refused, 300)
    }

    func testByteRangeSetParsing_ofHostileText_isNilOrCanonical() {
        var input = FuzzInput(seed: 0x5241_4e47)
        for step in 0..<10_000 {
            let text = (0..<input.below(4)).map { _ in "\(input.number())-\(input.number())" }.joined(separator: ",")
            let hostile = input.chance(2) ? input.mutate(text) : text
            guard let set = ByteRangeSet(parsing: hostile) else { continue }
            XCTAssertEqual(ByteRangeSet(set.ranges), set, "step \(step): '\(hostile)'")
            XCTAssertTrue(set.ranges.allSatisfy { $0.lowerBound >= 0 && !$0.isEmpty }, "step \(step): '\(hostile)'")
            XCTAssertEqual(ByteRangeSet(parsing: set.description), set, "step \(step): '\(hostile)'")
        }
    }

    // MARK: Playlists, listings, list and config files

    private func assertSafeName(_ raw: String, _ context: String) {
        let name = FileNaming.safe(raw)
        XCTAssertTrue(!name.isEmpty && name != "." && name != ".." && name.utf8.count <= 255
                      && !name.unicodeScalars.contains { $0 == "/" || $0.value == 0 }, "\(context): name '\(name)'")
    }

    func testPlaylist_ofHostileLines_parsesOnlyValidURLsOrRefusesWithEINVAL() {
        var input = FuzzInput(seed: 0x504c_4159)
        var entries = 0
        for step in 0..<3000 {
            var lines: [String] = input.chance(2) ? ["#EXTM3U"] : []
            for index in 0..<input.below(8) {
                let line = input.pick([
                    "#EXTINF:\(input.number()),Title \(index)", "#EXTINF:\(input.number())", "#EXTINF:-1 tvg-id=\"x\",",
                    "http://h.example/\(index).mp4", "https://h.example:\(input.number())/a.mkv", "rel/\(index).mp3",
                    "../up.mp3", "/abs.mp3", "\u{FEFF}#EXTM3U", "", "ftp://x/y", "http://[::1]:\(input.number())/v.mp4",
                    "http://%zz/", "http://h.example/a%00b/\(input.number()).mp3", input.garbage(),
                ])
                lines.append(input.chance(4) ? input.mutate(line) : line)
            }
            if input.chance(50) { lines.append("#EXT-X-TARGETDURATION:\(input.number())") }
            let text = lines.joined(separator: input.pick(["\n", "\r\n", "\r"]))
            let base = input.pick([nil, "http://h.example/list/p.m3u8", "https://h.example:8443/a/b.m3u"])
            do {
                for entry in try Playlist.parse(text, base: base, origin: "fuzz") {
                    entries += 1
                    XCTAssertNoThrow(try Source.validate(url: entry.url, origin: "fuzz"), "step \(step)")
                    assertSafeName(entry.name ?? FileNaming.name(forURL: entry.url), "step \(step)")
                }
            } catch {
                XCTAssertEqual((error as? MediaError)?.errno, EINVAL, "step \(step): \(error)")
            }
        }
        XCTAssertGreaterThan(entries, 1000)
    }

    func testHLSPlaylist_ofHostileLines_parsesWithinBoundsOrRefusesWithEINVAL() {
        var input = FuzzInput(seed: 0x484c_5321)
        var parsed = 0
        for step in 0..<3000 {
            var lines = input.chance(10) ? [] : ["#EXTM3U"]
            for index in 0..<input.below(12) {
                let line = input.pick([
                    "#EXTINF:\(input.number()),", "#EXT-X-BYTERANGE:\(input.number())@\(input.number())",
                    "#EXT-X-BYTERANGE:\(input.number())", "seg\(index).ts", "all.ts", "http://h.example:\(input.number())/s.ts",
                    "#EXT-X-MAP:URI=\"init.mp4\",BYTERANGE=\"\(input.number())@\(input.number())\"", "#EXT-X-ENDLIST",
                    "#EXT-X-PLAYLIST-TYPE:VOD", "#EXT-X-MEDIA-SEQUENCE:\(input.number())",
                    "#EXT-X-KEY:METHOD=AES-128,URI=\"k\",IV=0x\(String(repeating: "f", count: input.below(40)))",
                    "#EXT-X-KEY:METHOD=\(input.garbage(maxBytes: 8))", "#EXT-X-STREAM-INF:BANDWIDTH=\(input.number()),RESOLUTION=\(input.number())x\(input.number())",
                    "#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"a\",URI=\"\(input.garbage(maxBytes: 10))\"", "v\(index).m3u8",
                    "#EXT-X-STREAM-INF:\(input.garbage())", input.garbage(),
                ])
                lines.append(input.chance(4) ? input.mutate(line) : line)
            }
            let text = lines.joined(separator: input.pick(["\n", "\r\n"]))
            do {
                switch try HLSPlaylist.parse(text, base: "http://h.example/v/index.m3u8", origin: "fuzz") {
                case .media(let media):
                    parsed += 1
                    for part in media.segments + (media.map.map { [$0] } ?? []) {
                        XCTAssertNoThrow(try Source.validate(url: part.url, origin: "fuzz"), "step \(step)")
                        if let range = part.range {
                            XCTAssertTrue(range.lowerBound >= 0 && range.upperBound <= Limits.maxLength && !range.isEmpty,
                                          "step \(step): \(range)")
                        }
                        XCTAssertEqual(part.encryption?.iv.count ?? 16, 16, "step \(step)")
                    }
                    let vod = SegmentedVOD(url: "http://h.example/v/index.m3u8", parts: media.segments, contentType: "video/mp2t")
                    if let lengths = vod.listedLengths, let layout = try? vod.layout(lengths: lengths) {
                        XCTAssertLessThanOrEqual(layout.length, Limits.maxLength, "step \(step)")
                    }
                case .master(let master):
                    parsed += 1
                    XCTAssertFalse(master.variants.isEmpty, "step \(step)")
                }
            } catch {
                XCTAssertEqual((error as? MediaError)?.errno, EINVAL, "step \(step): \(error)")
            }
        }
        XCTAssertGreaterThan(parsed, 300)
    }

    func testHTMLIndex_ofHostileHTML_listsOnlyDirectChildrenOfTheBase() {
        var input = FuzzInput(seed: 0x4c49_5354)
        var entries = 0
        for step in 0..<3000 {
            let base = input.pick(["http://h.example/list/", "https://h.example:8443/a%20b/", "http://[::1]:8080/"])
            var html = "<html><body>"
            for index in 0..<input.below(10) {
                let href = input.pick([
                    "file\(index).mp4", "sub\(index)/", "../", "?C=M;O=A", "#frag", "http://other.example/x",
                    "\(base)deep\(index).mkv", "http://h.example:\(input.number())/list/x", "%2e%2e/", "%zz", "a%2Fb",
                    "/list/deep/x", "./", ".", "x?y", "//h.example/list/y", "a&amp;b&quot;.mp3", "%00.mp4", input.garbage(),
                ])
                let tag = input.pick(["<a href=\"\(href)\">x</a>", "<A HREF = '\(href)'>", "<a href=\(href) >",
                                      "<abbr href=\"\(href)\">", "<a ", "<a href=\"\(href)"])
                html += input.chance(4) ? input.mutate(tag) : tag
            }
            let baseURL = URLComponents(string: base)!
            for entry in HTMLIndex.parse(html: html, base: base) {
                entries += 1
                let url = URLComponents(string: entry.url)
                XCTAssertEqual(url?.host, baseURL.host, "step \(step): \(entry.url)")
                XCTAssertEqual(url?.port, baseURL.port, "step \(step): \(entry.url)")
                XCTAssertTrue(url?.percentEncodedPath.hasPrefix(baseURL.percentEncodedPath) ?? false, "step \(step): \(entry.url)")
                XCTAssertFalse(entry.name.isEmpty || entry.name == "." || entry.name == "..", "step \(step): \(entry)")
                assertSafeName(entry.name, "step \(step)")
            }
        }
        XCTAssertGreaterThan(entries, 1000)
    }

    func testListAndConfigFiles_ofHostileText_parseOrRefuseWithEINVAL() throws {
        var input = FuzzInput(seed: 0x4649_4c45)
        let path = "\(base)/list.txt"
        var sources = 0
        for step in 0..<2000 {
            let lines = (0..<input.below(6)).map { index -> String in
                if input.chance(2) { return input.pick(["http://h.example/\(index).mp4", "N\(index)\thttp://h.example/a", "# c"]) }
                let line = input.pick([
                    "http://h.example/\(index).mp4", "Name \(index)\thttps://h.example:\(input.number())/a",
                    "\thttp://h.example/x", "# comment", "", "[h.example]", "[h.example:\(input.number())]",
                    "Authorization: Bearer \(input.number())", "X-Size: \(input.number())", "ftp://h/x", input.garbage(),
                ])
                return input.chance(4) ? input.mutate(line) : line
            }
            let text = lines.joined(separator: input.pick(["\n", "\r\n"]))
            XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(text.utf8)))
            do {
                for entry in try ListFile.read(path: path) {
                    sources += 1
                    XCTAssertNoThrow(try Source.validate(url: entry.url, origin: "fuzz"), "step \(step)")
                    assertSafeName(entry.name ?? FileNaming.name(forURL: entry.url), "step \(step)")
                }
            } catch {
                XCTAssertEqual((error as? MediaError)?.errno, EINVAL, "step \(step) list: \(error)")
            }
            var options = HTTPOptions()
            do {
                try options.load(config: path)
                XCTAssertTrue(options.sections.flatMap(\.headers).allSatisfy(HTTPOptions.validHeader), "step \(step)")
            } catch {
                XCTAssertEqual((error as? MediaError)?.errno, EINVAL, "step \(step) config: \(error)")
            }
        }
        XCTAssertGreaterThan(sources, 300)
    }

    // MARK: Sizes and durations

    func testUnits_ofHostileSizesAndDurations_areNilOrWithinBounds() {
        var input = FuzzInput(seed: 0x554e_4954)
        var sizes = 0, durations = 0
        for step in 0..<20_000 {
            let raw = input.number() + input.pick(["", "K", "M", "G", "T", "B", "KiB", "k", "s", "m", "h", "d", "x", " "])
            let text = input.chance(3) ? input.mutate(raw) : raw
            if let bytes = Units.bytes(text) {
                sizes += 1
                XCTAssertTrue(Limits.isLength(bytes), "step \(step): '\(text)' gave \(bytes)")
            }
            if let seconds = Units.seconds(text) {
                durations += 1
                XCTAssertTrue(seconds >= 0 && seconds <= Limits.maxDuration, "step \(step): '\(text)' gave \(seconds)")
            }
        }
        XCTAssertGreaterThan(sizes, 1000)
        XCTAssertGreaterThan(durations, 1000)
    }
}
