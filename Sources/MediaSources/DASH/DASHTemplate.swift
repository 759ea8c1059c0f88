// A DASH SegmentTemplate's segments: the initialization URL and one media
// URL per segment, numbered from `startNumber` and timed by its
// SegmentTimeline (`<S t d r>`, `r="-1"` to the period's end) or by a fixed
// `duration` over the period. Identifiers `$RepresentationID$`,
// `$Bandwidth$`, `$Number$`, `$Time$` (with `%0Nd`) and `$$`; any other is
// refused. Counts, times and numbers are bounded and their sums checked.
import Foundation
import MediaSupport
import MediaStore
import MediaNetwork

extension DASHManifest {
    enum Template {
        struct Context {
            var id: String
            var bandwidth: Int64
            var base: MediaURL
            /// Names the representation in errors.
            var at: String
            var periodSeconds: Double?
            var template: [String: String] = [:]
            var timeline: [MPDTree]?
        }

        static func parts(_ context: Context) throws -> [HLSPlaylist.Part] {
            let at = context.at
            func fail(_ why: String) -> MediaError { MediaError(EINVAL, "\(at): \(why)") }
            func number(_ name: String, default value: Int64) throws -> Int64 {
                guard let text = context.template[name] else { return value }
                guard let parsed = Limits.length(text) else { throw fail("\(name) '\(text.prefix(40))' is not a count within bounds") }
                return parsed
            }
            guard let media = context.template["media"] else { throw fail("a SegmentTemplate without media") }
            let startNumber = try number("startNumber", default: 1)
            let timescale = try number("timescale", default: 1)
            guard timescale > 0 else { throw fail("timescale 0") }
            // (number, time) of each segment.
            var segments: [(Int64, Int64)] = []
            func add(_ time: Int64) throws {
                guard segments.count < HLSPlaylist.maxSegments else { throw fail("more than \(HLSPlaylist.maxSegments) segments") }
                let (number, overflow) = startNumber.addingReportingOverflow(Int64(segments.count))
                guard !overflow, number <= Limits.maxLength else { throw fail("segment numbers past the limit") }
                segments.append((number, time))
            }
            let periodEnd = context.periodSeconds.map { $0 * Double(timescale) }
            if let timeline = context.timeline {
                var time: Int64 = 0
                for (index, entry) in timeline.enumerated() {
                    let s = entry.attributes
                    if let text = s["t"] {
                        guard let t = Limits.length(text) else { throw fail("S@t '\(text.prefix(40))' is not a time within bounds") }
                        time = t
                    }
                    guard let d = s["d"].flatMap(Limits.length), d > 0 else { throw fail("an S without a positive d") }
                    var repeats: Int64 = 0
                    if let text = s["r"] {
                        if text == "-1" {
                            // To the next S's t, or the period's end.
                            let end = timeline.dropFirst(index + 1).first?.attributes["t"].flatMap(Limits.length).map(Double.init) ?? periodEnd
                            guard let end else { throw fail("S@r=-1 without a period duration") }
                            repeats = Int64(max(0, min(((end - Double(time)) / Double(d)).rounded(.up), Double(HLSPlaylist.maxSegments)))) - 1
                        } else {
                            guard let r = Limits.length(text), r < Int64(HLSPlaylist.maxSegments) else {
                                throw fail("S@r '\(text.prefix(40))' is not a repeat count within bounds")
                            }
                            repeats = r
                        }
                    }
                    var left = repeats + 1
                    while left > 0 {
                        try add(time)
                        let (next, overflow) = time.addingReportingOverflow(d)
                        guard !overflow, next <= Limits.maxLength else { throw fail("segment times past the limit") }
                        time = next
                        left -= 1
                    }
                }
            } else {
                guard let duration = context.template["duration"].flatMap(Limits.length), duration > 0 else {
                    throw fail("a SegmentTemplate with neither a SegmentTimeline nor a duration")
                }
                guard let periodEnd else { throw fail("a SegmentTemplate duration without a period duration") }
                let count = (periodEnd / Double(duration)).rounded(.up)
                guard count.isFinite, count >= 1, count <= Double(HLSPlaylist.maxSegments) else {
                    throw fail("\(count) segments")
                }
                for index in 0..<Int64(count) {
                    try add(index * duration)
                }
            }
            var parts: [HLSPlaylist.Part] = []
            if let initialization = context.template["initialization"] {
                parts.append(try part(substitute(initialization, context, number: nil, time: nil), context))
            }
            for (number, time) in segments {
                parts.append(try part(substitute(media, context, number: number, time: time), context))
            }
            return parts
        }

        private static func part(_ relative: String, _ context: Context) throws -> HLSPlaylist.Part {
            guard let url = context.base.resolving(relative)?.text else {
                throw MediaError(EINVAL, "\(context.at): '\(MediaError.redacted(relative))' is not a URL")
            }
            return HLSPlaylist.Part(url: try DASHManifest.checked(url, at: context.at), range: nil)
        }

        /// The template with its identifiers replaced.
        static func substitute(_ template: String, _ context: Context, number: Int64?, time: Int64?) throws -> String {
            var out = ""
            var rest = Substring(template)
            while let dollar = rest.firstIndex(of: "$") {
                out += rest[..<dollar]
                rest = rest[rest.index(after: dollar)...]
                guard let close = rest.firstIndex(of: "$") else {
                    throw MediaError(EINVAL, "\(context.at): an unclosed $ in '\(template.prefix(80))'")
                }
                let identifier = rest[..<close]
                rest = rest[rest.index(after: close)...]
                if identifier.isEmpty {
                    out += "$"
                    continue
                }
                let (name, format) = identifier.firstIndex(of: "%").map { (identifier[..<$0], identifier[$0...]) }
                    ?? (identifier, "")
                let value: String
                switch (name, number, time) {
                case ("RepresentationID", _, _) where format.isEmpty: value = context.id
                case ("Bandwidth", _, _): value = String(context.bandwidth)
                case ("Number", let number?, _): value = String(number)
                case ("Time", _, let time?): value = String(time)
                default:
                    throw MediaError(EINVAL, "\(context.at): $\(identifier.prefix(40))$ cannot be filled in '\(template.prefix(80))'")
                }
                out += try padded(value, format, at: context.at)
            }
            return out + rest
        }

        /// `%0Nd` (N at most 32) applied to a decimal value.
        private static func padded(_ value: String, _ format: Substring, at: String) throws -> String {
            guard !format.isEmpty else { return value }
            guard format.hasPrefix("%0"), format.hasSuffix("d"), let width = Int(format.dropFirst(2).dropLast()),
                  (1...32).contains(width) else {
                throw MediaError(EINVAL, "\(at): format '\(format.prefix(20))' is not %0Nd")
            }
            return String(repeating: "0", count: max(0, width - value.count)) + value
        }
    }
}
