// A static DASH MPD (ISO/IEC 23009-1) as what mediafs serves: its one
// period's adaptation sets, each representation's parts (initialization,
// then media segments) from a SegmentTemplate (`$Number$` or `$Time$`,
// with a SegmentTimeline or a fixed duration), a SegmentList, or a
// SegmentBase (the representation's one resource). BaseURLs resolve from
// the MPD down to the representation. Pure: no network, no locks. A
// dynamic (live) MPD, several periods, protected content and every number
// out of bounds are refused with a MediaError (EINVAL) naming the MPD.
import Foundation
import MediaSupport
import MediaStore
import MediaNetwork

package struct DASHManifest: Equatable, Sendable {
    package struct Representation: Equatable, Sendable {
        package var id: String
        package var bandwidth: Int64
        package var height: Int64?
        package var parts: [HLSPlaylist.Part]
    }

    package struct AdaptationSet: Equatable, Sendable {
        /// `video`, `audio`, `text` or "" when the MPD does not say.
        package var kind: String
        package var language: String?
        package var representations: [Representation]
    }

    package var adaptationSets: [AdaptationSet]

    package static func parse(_ xml: Data, base: String, origin: String) throws -> DASHManifest {
        let mpd = try MPDTree.parse(xml, origin: origin)
        func fail(_ why: String) -> MediaError { MediaError(EINVAL, "\(origin): \(why)") }
        if (mpd.attributes["type"] ?? "static") != "static" {
            throw fail("a live DASH MPD (type=\"\(mpd.attributes["type"]!.prefix(20))\"); mediafs serves video on demand only")
        }
        let periods = mpd.all("Period")
        guard periods.count == 1, let period = periods.first else {
            throw fail("\(periods.count) periods; mediafs serves an MPD of one period")
        }
        let periodSeconds = try (period.attributes["duration"] ?? mpd.attributes["mediaPresentationDuration"])
            .map { text -> Double in
                guard let seconds = isoDuration(text) else { throw fail("duration '\(text.prefix(40))' is not an ISO 8601 duration") }
                return seconds
            }
        let mpdBase = try resolve(mpd, against: MediaURL(base), origin: origin)
        let periodBase = try resolve(period, against: mpdBase, origin: origin)
        var sets: [AdaptationSet] = []
        for set in period.all("AdaptationSet") {
            if set.first("ContentProtection") != nil { throw fail("protected (DRM) content is not served") }
            let setBase = try resolve(set, against: periodBase, origin: origin)
            var representations: [Representation] = []
            var kind = set.attributes["contentType"] ?? kindOf(set.attributes["mimeType"])
            for rep in set.all("Representation") {
                if rep.first("ContentProtection") != nil { throw fail("protected (DRM) content is not served") }
                let id = rep.attributes["id"] ?? ""
                let at = "\(origin): representation '\(id.prefix(40))'"
                guard let bandwidth = rep.attributes["bandwidth"].flatMap(Limits.length) else {
                    throw MediaError(EINVAL, "\(at): no valid bandwidth")
                }
                if kind.isEmpty { kind = kindOf(rep.attributes["mimeType"]) }
                let repBase = try resolve(rep, against: setBase, origin: origin)
                guard let repBase else { throw MediaError(EINVAL, "\(at): no base URL to resolve against") }
                var context = Template.Context(id: id, bandwidth: bandwidth, base: repBase, at: at, periodSeconds: periodSeconds)
                let parts: [HLSPlaylist.Part]
                if let template = rep.first("SegmentTemplate") ?? set.first("SegmentTemplate") {
                    // A representation's template refines its adaptation set's.
                    let inherited = set.first("SegmentTemplate")
                    context.template = inherited.map { $0.attributes.merging(template.attributes) { _, own in own } }
                        ?? template.attributes
                    context.timeline = (template.first("SegmentTimeline") ?? inherited?.first("SegmentTimeline"))?.all("S")
                    parts = try Template.parts(context)
                } else if let list = rep.first("SegmentList") ?? set.first("SegmentList") {
                    parts = try segmentList(list, context: context)
                } else {
                    // SegmentBase, or nothing: the representation is one resource.
                    parts = [HLSPlaylist.Part(url: try checked(repBase.text, at: at), range: nil)]
                }
                guard !parts.isEmpty, parts.count <= HLSPlaylist.maxSegments + 1 else {
                    throw MediaError(EINVAL, "\(at): \(parts.count) segments")
                }
                representations.append(Representation(id: id, bandwidth: bandwidth,
                                                       height: rep.attributes["height"].flatMap(Limits.length),
                                                       parts: parts))
            }
            if !representations.isEmpty {
                sets.append(AdaptationSet(kind: kind.lowercased(), language: set.attributes["lang"], representations: representations))
            }
        }
        guard !sets.isEmpty else { throw fail("no representation") }
        return DASHManifest(adaptationSets: sets)
    }

    static func kindOf(_ mimeType: String?) -> String {
        guard let mimeType, let slash = mimeType.firstIndex(of: "/") else { return "" }
        return String(mimeType[..<slash]).lowercased()
    }

    /// An element's BaseURL against its parent's (the element's own, if none).
    static func resolve(_ element: MPDTree, against parent: MediaURL?, origin: String) throws -> MediaURL? {
        guard let text = element.first("BaseURL")?.text.trimmingCharacters(in: .whitespacesAndNewlines), !text.isEmpty else {
            return parent
        }
        guard let url = parent.map({ $0.resolving(text) }) ?? MediaURL(text) else {
            throw MediaError(EINVAL, "\(origin): BaseURL '\(MediaError.redacted(text))' is not a URL")
        }
        return url
    }

    static func checked(_ url: String, at: String) throws -> String {
        try Source.validate(url: url, origin: at)
        guard MediaURL(url)?.isHTTP == true else {
            throw MediaError(EINVAL, "\(at): segments are fetched over http(s) only")
        }
        return url
    }

    static func segmentList(_ list: MPDTree, context: Template.Context) throws -> [HLSPlaylist.Part] {
        var parts: [HLSPlaylist.Part] = []
        func part(_ url: String?, _ range: String?) throws -> HLSPlaylist.Part {
            let resolved = try url.map { text -> String in
                guard let url = context.base.resolving(text)?.text else {
                    throw MediaError(EINVAL, "\(context.at): '\(MediaError.redacted(text))' is not a URL")
                }
                return url
            } ?? context.base.text
            return HLSPlaylist.Part(url: try checked(resolved, at: context.at), range: try range.map { try byteRange($0, at: context.at) })
        }
        if let initialization = list.first("Initialization") {
            parts.append(try part(initialization.attributes["sourceURL"], initialization.attributes["range"]))
        }
        for segment in list.all("SegmentURL") {
            parts.append(try part(segment.attributes["media"], segment.attributes["mediaRange"]))
        }
        return parts
    }

    /// `FIRST-LAST` (inclusive) as a half-open range within the bounds.
    static func byteRange(_ text: String, at: String) throws -> Range<Int64> {
        let bounds = text.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard bounds.count == 2, let first = Limits.length(bounds[0]), let last = Limits.length(bounds[1]), first <= last,
              last < Limits.maxLength else {
            throw MediaError(EINVAL, "\(at): byte range '\(text.prefix(40))' is not FIRST-LAST within bounds")
        }
        return first..<(last + 1)
    }

    /// An ISO 8601 duration of days, hours, minutes and seconds
    /// (`PT1H2M3.5S`, `P1DT0S`) in seconds; nil for anything else or past
    /// `Limits.maxDuration`.
    static func isoDuration(_ text: String) -> Double? {
        var rest = Substring(text.trimmingCharacters(in: .whitespaces).uppercased())
        guard rest.hasPrefix("P") else { return nil }
        rest.removeFirst()
        var seconds = 0.0
        var inTime = false
        var number = ""
        var sawField = false
        for character in rest {
            if character == "T", number.isEmpty, !inTime {
                inTime = true
                continue
            }
            if character.isASCII, character.isNumber || character == "." {
                number.append(character)
                guard number.count <= 20 else { return nil }
                continue
            }
            guard let value = Double(number), value.isFinite, value >= 0 else { return nil }
            number = ""
            switch (character, inTime) {
            case ("D", false): seconds += value * 86_400
            case ("H", true): seconds += value * 3_600
            case ("M", true): seconds += value * 60
            case ("S", true): seconds += value
            default: return nil
            }
            sawField = true
        }
        guard number.isEmpty, sawField, seconds <= Limits.maxDuration else { return nil }
        return seconds
    }
}
