// `mediafs status MOUNTPOINT [--json] [--watch] [--readers]`: per file the
// cached share, state, pin and rate, and totals (with a warning when pinned
// files alone exceed the cache limit); with --readers, who reads what
// instead: each process and file, its class, bytes read and fetched. All
// read from the mount's xattrs.
import Foundation
import MediaCache
import MediaSupport

struct StatusCommand {
    static let usage = "usage: mediafs status MOUNTPOINT [--json] [--watch] [--readers]"
    static let barWidth = 20
    static let watchInterval = 1.0

    struct Row {
        var name: String
        var size: Int64
        var cached: Int64
        var complete: Bool
        var state: String
        var pinned: Bool
    }

    var mountpoint = ""
    var json = false
    var watch = false
    var readers = false

    init(arguments: [String]) throws {
        var positional: [String] = []
        for argument in arguments {
            switch argument {
            case "--json": json = true
            case "--watch": watch = true
            case "--readers": readers = true
            default:
                if argument.hasPrefix("-") { throw UsageError("unknown option '\(argument)'\n\(Self.usage)") }
                positional.append(argument)
            }
        }
        guard positional.count == 1 else { throw UsageError(Self.usage) }
        mountpoint = positional[0]
    }

    func rows() throws -> [Row] {
        try Xattr.requireMount(mountpoint)
        // Files of the root; a listed directory's files are not fetched here.
        let names = try FileManager.default.contentsOfDirectory(atPath: mountpoint).sorted().filter { name in
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: mountpoint + "/" + name, isDirectory: &isDirectory)
                && !isDirectory.boolValue
        }
        return names.map { name in
            let path = mountpoint + "/" + name
            let get = { (key: String) in (try? Xattr.get(path, key)) ?? "" }
            return Row(name: name, size: Limits.length(get("size")) ?? 0, cached: Limits.length(get("cached_bytes")) ?? 0,
                       complete: get("complete") == "1", state: get("state"), pinned: get("pin") == "1")
        }
    }

    func run() throws {
        var previous: [String: Int64] = [:]
        repeat {
            if readers {
                if watch && !json { print("\u{1B}[H\u{1B}[2J", terminator: "") }
                print(try json ? readersJSONText() : readersTable())
                if watch { Thread.sleep(forTimeInterval: Self.watchInterval) }
                continue
            }
            let rows = try rows()
            if json {
                print(try jsonText(rows))
            } else {
                if watch { print("\u{1B}[H\u{1B}[2J", terminator: "") }
                print(table(rows, previous: watch ? previous : nil))
                if let classes = classLine() { print(classes) }
                for line in sourceLines() { print(line) }
                for warning in warnings() { print(warning) }
            }
            previous = Dictionary(uniqueKeysWithValues: rows.map { ($0.name, $0.cached) })
            if watch { Thread.sleep(forTimeInterval: Self.watchInterval) }
        } while watch
    }

    func jsonText(_ rows: [Row]) throws -> String {
        let files: [[String: Any]] = rows.map {
            ["name": $0.name, "size": $0.size, "cached_bytes": $0.cached, "complete": $0.complete, "state": $0.state,
             "pinned": $0.pinned]
        }
        let stats = try JSONSerialization.jsonObject(with: Data(Xattr.get(mountpoint, "stats").utf8))
        let sources = (try? Xattr.get(mountpoint, "sources")).flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) }
        let object: [String: Any] = ["mountpoint": mountpoint, "files": files, "totals": stats, "sources": sources ?? [],
                                     "readers": try readerObjects()]
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        return String(decoding: data, as: UTF8.self)
    }

    /// The root's `readers` as JSON objects (an older daemon has none).
    func readerObjects() throws -> [[String: Any]] {
        try Xattr.requireMount(mountpoint)
        guard let text = try? Xattr.get(mountpoint, "readers") else { return [] }
        return (try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]]) ?? []
    }

    func readersJSONText() throws -> String {
        let object: [String: Any] = ["mountpoint": mountpoint, "readers": try readerObjects()]
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        return String(decoding: data, as: UTF8.self)
    }

    /// A line per reader and file (live first), its command line under it.
    func readersTable() throws -> String {
        let format = DateFormatter()
        format.dateFormat = "HH:mm:ss"
        func number(_ object: [String: Any], _ key: String) -> Int64 { (object[key] as? NSNumber)?.int64Value ?? 0 }
        func time(_ object: [String: Any], _ key: String) -> String? {
            (object[key] as? NSNumber).map { format.string(from: Date(timeIntervalSince1970: $0.doubleValue)) }
        }
        func pad(_ text: String, _ width: Int) -> String {
            text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
        }
        let readers = try readerObjects()
        var lines = [pad("PID", 8) + pad("PROCESS", 16) + pad("CLASS", 6) + pad("READ", 11) + pad("FETCHED", 11)
                     + pad("RATE", 13) + pad("SINCE", 9) + "FILE"]
        for reader in readers {
            let ended = time(reader, "ended").map { "  (ended \($0))" } ?? ""
            lines.append(pad("\(number(reader, "pid"))", 8) + pad(reader["process"] as? String ?? "", 16)
                         + pad(reader["class"] as? String ?? "", 6)
                         // `+`: the kernel read some of it itself (passthrough), uncounted.
                         + pad(Self.human(number(reader, "bytes_read"))
                               + ((reader["kernel_reads"] as? Bool) == true ? "+" : ""), 11)
                         + pad(Self.human(number(reader, "bytes_fetched")), 11)
                         + pad(Self.human(number(reader, "bytes_per_second")) + "/s", 13)
                         + pad(time(reader, "since") ?? "", 9) + (reader["file"] as? String ?? "") + ended)
            let parent = (reader["parent"] as? String).flatMap { $0.isEmpty ? nil : " (parent \($0))" } ?? ""
            lines.append(String(repeating: " ", count: 8) + (reader["arguments"] as? String ?? "") + parent)
        }
        lines.append("\(readers.filter { $0["ended"] is NSNull || $0["ended"] == nil }.count) reading, "
                     + "\(readers.count) listed")
        return lines.joined(separator: "\n")
    }

    func table(_ rows: [Row], previous: [String: Int64]?) -> String {
        var lines: [String] = []
        for row in rows {
            // Clamped: a daemon reporting more cached than size must not break the bar.
            let share = min(1, row.size > 0 ? Double(row.cached) / Double(row.size) : (row.complete ? 1 : 0))
            let filled = Int((share * Double(Self.barWidth)).rounded(.down))
            let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: Self.barWidth - filled)
            var line = "[\(bar)] \(String(format: "%5.1f%%", share * 100)) \(Self.human(row.cached))/\(Self.human(row.size)) "
                + (row.pinned ? "pinned " : "") + row.state
            if let before = previous?[row.name], row.cached > before {
                line += " \(Self.human(Int64(Double(row.cached - before) / Self.watchInterval)))/s"
            }
            lines.append(line + "  " + row.name)
        }
        // Each value is at most Limits.maxLength, but a few of them can pass Int64.max.
        let cached = rows.reduce(Int64(0)) { $0.addingSaturating($1.cached) }
        let size = rows.reduce(Int64(0)) { $0.addingSaturating($1.size) }
        lines.append("total: \(rows.count) files, \(Self.human(cached)) of \(Self.human(size)) cached, "
                     + "\(rows.filter(\.complete).count) complete")
        return lines.joined(separator: "\n")
    }

    /// A line per source whose server does not answer: since when, and why.
    func sourceLines() -> [String] {
        guard let text = try? Xattr.get(mountpoint, "sources"),
              let sources = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]] else { return [] }
        let format = DateFormatter()
        format.dateFormat = "yyyy-MM-dd HH:mm:ss"
        return sources.compactMap { source in
            guard source["state"] as? String == "unreachable", let origin = source["origin"] as? String,
                  let since = (source["since"] as? NSNumber)?.doubleValue else { return nil }
            let when = format.string(from: Date(timeIntervalSince1970: since))
            return "source \(origin): unreachable since \(when) (\(source["error"] as? String ?? "")); serving its saved listing"
        }
    }

    /// Bytes fetched and served for players, library scans and background jobs.
    func classLine() -> String? {
        guard let text = try? Xattr.get(mountpoint, "stats"),
              let stats = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else { return nil }
        func value(_ key: String) -> Int64 { (stats[key] as? NSNumber)?.int64Value ?? 0 }
        return "play: \(Self.human(value("play_bytes_fetched"))) fetched, \(Self.human(value("play_bytes_served"))) read; "
            + "scan: \(Self.human(value("scan_bytes_fetched"))) fetched, \(Self.human(value("scan_bytes_served"))) read; "
            + "background: \(Self.human(value("background_bytes_fetched"))) fetched, "
            + "\(Self.human(value("background_bytes_served"))) read"
            + (stats["background_daily_limit"] == nil ? "" : " (\(Self.human(value("background_daily_used"))) of "
               + "\(Self.human(value("background_daily_limit"))) today)")
    }

    /// What the mount's stats warn of: pinned files alone over the cache
    /// limit, a cache disk that leaves no room.
    func warnings() -> [String] {
        guard let text = try? Xattr.get(mountpoint, "stats"),
              let stats = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else { return [] }
        let bytes = { (key: String) in (stats[key] as? NSNumber).map { Self.human($0.int64Value) } ?? "?" }
        var lines: [String] = []
        if stats["pinned_over_limit"] as? Bool == true {
            lines.append("warning: pinned files take \(bytes("pinned_bytes")), more than the cache limit of "
                         + "\(bytes("cache_max_size")): nothing else is kept, new bytes pass uncached")
        }
        if stats["cache_no_room"] as? Bool == true {
            lines.append("warning: the cache's disk has \(bytes("cache_free_bytes")) free, less than --cache-min-free "
                         + "\(bytes("cache_min_free")) leaves room for: reads pass through uncached")
        }
        return lines
    }

    static func human(_ bytes: Int64) -> String { Units.describe(bytes) }
}
