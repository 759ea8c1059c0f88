// An HLS playlist's text as values (RFC 8216): a media playlist (its
// segments, their byte ranges, its init segment, whether it ends) or a
// master playlist (its variants and renditions). Pure: no network, no
// locks. Every number is bounded before use; a hostile value (a byte range
// past `Limits.maxLength`, a sum that overflows, a negative or unparsable
// length) throws a MediaError naming the playlist and line.
import Foundation
import MediaStore
import MediaSupport
import MediaNetwork

package enum HLSPlaylist: Equatable, Sendable {
    case media(Media)
    case master(Master)

    /// More segments than this is not a playlist mediafs serves as a file.
    package static let maxSegments = 200_000

    /// One URL's bytes, or a byte range of it (`#EXT-X-BYTERANGE`).
    package struct Part: Equatable, Sendable {
        package var url: String
        /// Half-open; nil: the whole resource.
        package var range: Range<Int64>?
        /// Set when the bytes are AES-128-CBC cipher text (`#EXT-X-KEY`).
        package var encryption: Encryption?
        /// The version of the resource `range` was read from, when known (an
        /// archive's volume: its offsets come from its headers): its length
        /// and ETag. A read sends it as If-Range, and an answer of another
        /// version fails rather than giving another version's bytes.
        package var resource: Resource?

        package struct Resource: Equatable, Sendable {
            package var length: Int64
            package var etag: String?
            package var lastModified: String?
            /// What If-Range carries: a strong ETag only. A date or a weak
            /// ETag (Apache's for a file changed within the last second)
            /// makes a server answer 200 for the same version; the answer's
            /// own length and validators are checked instead.
            package var ifRange: String? {
                guard let etag, !etag.hasPrefix("W/") else { return nil }
                return etag
            }
        }

        package init(url: String, range: Range<Int64>?, encryption: Encryption? = nil, resource: Resource? = nil) {
            self.url = url
            self.range = range
            self.encryption = encryption
            self.resource = resource
        }
    }

    /// `METHOD=AES-128`: where the key is, and the IV (from the tag, else
    /// the segment's media sequence number, big-endian).
    package struct Encryption: Equatable, Sendable {
        package var keyURL: String
        package var iv: [UInt8]
    }

    package struct Media: Equatable, Sendable {
        /// `#EXT-X-MAP`: the fMP4 init segment, before the first media segment.
        package var map: Part?
        package var segments: [Part] = []
        /// `#EXT-X-ENDLIST` or `#EXT-X-PLAYLIST-TYPE:VOD`: nothing will be added.
        package var ends = false
    }

    package struct Variant: Equatable, Sendable {
        package var url: String
        package var bandwidth: Int64
        /// From RESOLUTION=WxH; nil when absent.
        package var height: Int64?
        /// Its AUDIO group, when it names one.
        package var audioGroup: String?
    }

    package struct Rendition: Equatable, Sendable {
        package var url: String
        /// AUDIO, VIDEO, SUBTITLES, CLOSED-CAPTIONS (upper-cased).
        package var type: String
        package var group: String
        package var language: String?
        package var name: String?
    }

    package struct Master: Equatable, Sendable {
        package var variants: [Variant] = []
        package var renditions: [Rendition] = []
    }

    /// Whether a playlist's text is HLS rather than a plain (extended) M3U.
    package static func isHLS(_ text: String) -> Bool {
        text.split(whereSeparator: \.isNewline).contains { $0.trimmingSpaces.hasPrefix("#EXT-X-") }
    }

    /// Parses `text`, fetched from `base`; relative URIs resolve against it.
    /// `origin` names the playlist in errors.
    package static func parse(_ text: String, base: String, origin: String) throws -> HLSPlaylist {
        guard let baseURL = MediaURL(base) else { throw MediaError(EINVAL, "\(origin): malformed URL") }
        var media = Media()
        var master = Master()
        var isMedia = false
        var isMaster = false
        var pendingRange: PendingRange?
        var sawHeader = false
        var pendingVariant: Variant?
        // Where the last byte-range segment ended, for a BYTERANGE without an offset.
        var lastRangeEnd: (url: String, end: Int64)?
        var sequence: Int64 = 0
        /// The key in force, and its IV if the tag gave one.
        var key: (url: String, iv: [UInt8]?)?
        let lines = text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
        for (index, raw) in lines.enumerated() {
            var line = String(raw.trimmingSpaces)
            if index == 0, line.hasPrefix("\u{FEFF}") { line.removeFirst() }
            let at = "\(origin):\(index + 1)"
            if line.isEmpty { continue }
            if !sawHeader {
                guard line == "#EXTM3U" else { throw MediaError(EINVAL, "\(at): an HLS playlist starts with #EXTM3U") }
                sawHeader = true
                continue
            }
            if line.hasPrefix("#") {
                let (tag, value) = split(tag: line)
                switch tag {
                case "#EXTINF", "#EXT-X-TARGETDURATION":
                    isMedia = true
                case "#EXT-X-MEDIA-SEQUENCE":
                    isMedia = true
                    guard let first = Limits.length(value), media.segments.isEmpty else {
                        throw MediaError(EINVAL, "\(at): #EXT-X-MEDIA-SEQUENCE '\(value.prefix(40))' is not a count before the segments")
                    }
                    sequence = first
                case "#EXT-X-ENDLIST":
                    isMedia = true
                    media.ends = true
                case "#EXT-X-PLAYLIST-TYPE":
                    isMedia = true
                    if value.uppercased() == "VOD" { media.ends = true }
                case "#EXT-X-BYTERANGE":
                    // No offset: it follows the previous range of the same URI,
                    // checked once the URI line is read.
                    pendingRange = try byteRange(value, at: at, continuing: nil).map(PendingRange.at)
                        ?? .following(Int64(try byteRange(value, at: at, continuing: 0)!.count))
                case "#EXT-X-MAP":
                    let attributes = try self.attributes(value, at: at)
                    guard let uri = attributes["URI"] else { throw MediaError(EINVAL, "\(at): #EXT-X-MAP without a URI") }
                    guard key == nil else {
                        throw MediaError(EINVAL, "\(at): an encrypted init segment (#EXT-X-MAP after #EXT-X-KEY) is not served")
                    }
                    guard media.map == nil else {
                        throw MediaError(EINVAL, "\(at): a second #EXT-X-MAP (a playlist whose init segment changes is not one file)")
                    }
                    let url = try resolve(uri, against: baseURL, at: at)
                    var range: Range<Int64>?
                    if let text = attributes["BYTERANGE"] {
                        guard let parsed = try byteRange(text, at: at, continuing: nil) else {
                            throw MediaError(EINVAL, "\(at): #EXT-X-MAP BYTERANGE needs an offset")
                        }
                        range = parsed
                    }
                    media.map = Part(url: url, range: range)
                case "#EXT-X-KEY", "#EXT-X-SESSION-KEY":
                    let attributes = try self.attributes(value, at: at)
                    let method = attributes["METHOD"]?.uppercased() ?? ""
                    let format = attributes["KEYFORMAT"] ?? "identity"
                    if method == "NONE" {
                        key = nil
                        break
                    }
                    guard method == "AES-128", format == "identity", tag == "#EXT-X-KEY" else {
                        throw MediaError(EINVAL, "\(at): segments encrypted with METHOD=\(method) KEYFORMAT=\(format) "
                                         + "are not served (only METHOD=AES-128 with an identity key)")
                    }
                    guard let uri = attributes["URI"] else { throw MediaError(EINVAL, "\(at): #EXT-X-KEY without a URI") }
                    var iv: [UInt8]?
                    if let text = attributes["IV"] {
                        guard let parsed = Self.iv(text) else {
                            throw MediaError(EINVAL, "\(at): IV '\(text.prefix(40))' is not 0x and 32 hex digits")
                        }
                        iv = parsed
                    }
                    key = (try resolve(uri, against: baseURL, at: at), iv)
                case "#EXT-X-STREAM-INF":
                    isMaster = true
                    let attributes = try self.attributes(value, at: at)
                    guard let bandwidth = attributes["BANDWIDTH"].flatMap(Limits.length) else {
                        throw MediaError(EINVAL, "\(at): #EXT-X-STREAM-INF without a valid BANDWIDTH")
                    }
                    var height: Int64?
                    if let resolution = attributes["RESOLUTION"] {
                        let sides = resolution.lowercased().split(separator: "x")
                        guard sides.count == 2, Limits.length(sides[0]) != nil, let h = Limits.length(sides[1]) else {
                            throw MediaError(EINVAL, "\(at): RESOLUTION '\(resolution.prefix(40))' is not WIDTHxHEIGHT")
                        }
                        height = h
                    }
                    pendingVariant = Variant(url: "", bandwidth: bandwidth, height: height, audioGroup: attributes["AUDIO"])
                case "#EXT-X-MEDIA":
                    isMaster = true
                    let attributes = try self.attributes(value, at: at)
                    guard let uri = attributes["URI"] else { break }
                    master.renditions.append(Rendition(
                        url: try resolve(uri, against: baseURL, at: at), type: attributes["TYPE"]?.uppercased() ?? "",
                        group: attributes["GROUP-ID"] ?? "", language: attributes["LANGUAGE"], name: attributes["NAME"]))
                default:
                    continue
                }
                continue
            }
            let url = try resolve(line, against: baseURL, at: at)
            if var variant = pendingVariant {
                variant.url = url
                master.variants.append(variant)
                pendingVariant = nil
                continue
            }
            isMedia = true
            guard media.segments.count < maxSegments else {
                throw MediaError(EINVAL, "\(at): more than \(maxSegments) segments")
            }
            var range: Range<Int64>?
            switch pendingRange {
            case nil: range = nil
            case .at(let given): range = given
            case .following(let length):
                guard let last = lastRangeEnd, last.url == url else {
                    throw MediaError(EINVAL, "\(at): #EXT-X-BYTERANGE without an offset must follow a range of the same URI")
                }
                let (end, overflow) = last.end.addingReportingOverflow(length)
                guard !overflow, end <= Limits.maxLength else { throw MediaError(EINVAL, "\(at): byte range ends past the limit") }
                range = last.end..<end
            }
            if let range { lastRangeEnd = (url, range.upperBound) } else { lastRangeEnd = nil }
            let encryption = key.map { key in
                Encryption(keyURL: key.url, iv: key.iv ?? (0..<16).map { UInt8(truncatingIfNeeded: $0 < 8 ? 0 : sequence >> (8 * (15 - $0))) })
            }
            media.segments.append(Part(url: url, range: range, encryption: encryption))
            pendingRange = nil
            sequence += 1
        }
        if isMaster && isMedia {
            throw MediaError(EINVAL, "\(origin): both a master playlist (#EXT-X-STREAM-INF) and a media playlist")
        }
        if isMaster {
            guard !master.variants.isEmpty else { throw MediaError(EINVAL, "\(origin): a master playlist without variants") }
            return .master(master)
        }
        return .media(media)
    }

    /// A `#EXT-X-BYTERANGE` waiting for its URI line.
    enum PendingRange {
        case at(Range<Int64>)
        /// LENGTH without an offset: after the previous range of the same URI.
        case following(Int64)
    }

    /// `0x` and 32 hex digits as 16 bytes.
    static func iv(_ text: String) -> [UInt8]? {
        let lower = text.lowercased()
        guard lower.hasPrefix("0x") else { return nil }
        let digits = Array(lower.utf8.dropFirst(2))
        let isHex = { (c: UInt8) in (48...57).contains(c) || (97...102).contains(c) }
        guard digits.count == 32, digits.allSatisfy(isHex) else { return nil }
        var bytes: [UInt8] = []
        for index in stride(from: 0, to: 32, by: 2) {
            guard let byte = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) else { return nil }
            bytes.append(byte)
        }
        return bytes
    }

    /// "#TAG:VALUE" as ("#TAG", "VALUE").
    static func split(tag line: String) -> (String, String) {
        guard let colon = line.firstIndex(of: ":") else { return (line, "") }
        return (String(line[..<colon]), String(line[line.index(after: colon)...]))
    }

    /// `LENGTH[@OFFSET]` as a half-open range; nil when there is no offset
    /// and `continuing` is nil. With `continuing`, a missing offset gives
    /// `continuing..<continuing+LENGTH`. Throws on a value out of bounds.
    static func byteRange(_ text: String, at: String, continuing: Int64?) throws -> Range<Int64>? {
        let parts = text.split(separator: "@", maxSplits: 1, omittingEmptySubsequences: false)
        guard let length = Limits.length(parts[0].trimmingSpaces), length > 0 else {
            throw MediaError(EINVAL, "\(at): byte range length '\(text.prefix(40))' is not a positive count within bounds")
        }
        let offset: Int64
        if parts.count == 2 {
            guard let parsed = Limits.length(parts[1].trimmingSpaces) else {
                throw MediaError(EINVAL, "\(at): byte range offset '\(text.prefix(40))' is not a count within bounds")
            }
            offset = parsed
        } else if let continuing {
            offset = continuing
        } else {
            return nil
        }
        let (end, overflow) = offset.addingReportingOverflow(length)
        guard !overflow, end <= Limits.maxLength else {
            throw MediaError(EINVAL, "\(at): byte range '\(text.prefix(40))' ends past \(Limits.maxLength)")
        }
        return offset..<end
    }

    /// An attribute list (`KEY=VALUE,KEY="quoted, value"`) as a dictionary.
    static func attributes(_ text: String, at: String) throws -> [String: String] {
        var result: [String: String] = [:]
        var rest = Substring(text)
        while !rest.isEmpty {
            guard let equals = rest.firstIndex(of: "=") else {
                throw MediaError(EINVAL, "\(at): attribute '\(rest.prefix(40))' has no value")
            }
            let key = String(rest[..<equals].trimmingSpaces)
            rest = rest[rest.index(after: equals)...]
            let value: Substring
            if rest.first == "\"" {
                rest.removeFirst()
                guard let close = rest.firstIndex(of: "\"") else {
                    throw MediaError(EINVAL, "\(at): attribute \(key.prefix(40)) has an unclosed quote")
                }
                value = rest[..<close]
                rest = rest[rest.index(after: close)...]
            } else {
                let end = rest.firstIndex(of: ",") ?? rest.endIndex
                value = rest[..<end]
                rest = rest[end...]
            }
            result[key] = String(value)
            if rest.first == "," { rest.removeFirst() }
        }
        return result
    }

    static func resolve(_ uri: String, against base: MediaURL, at: String) throws -> String {
        guard let url = base.resolving(uri)?.text else {
            throw MediaError(EINVAL, "\(at): '\(MediaError.redacted(uri))' is not a URL")
        }
        try Source.validate(url: url, origin: at)
        guard MediaURL(url)?.isHTTP == true else {
            throw MediaError(EINVAL, "\(at): segments are fetched over http(s) only")
        }
        return url
    }
}
