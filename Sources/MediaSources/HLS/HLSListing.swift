// An HLS presentation as files: a media playlist that ends becomes one file
// (`NAME.ts` for MPEG-TS segments, `NAME.mp4` for fMP4 ones), a
// SegmentedVOD whose parts are its init segment and media segments; a
// master playlist becomes its chosen variant's file, and beside it one file
// per audio rendition in its own playlist (`NAME.audio-LANG.mp4`). A live
// playlist (no end) is refused, naming it: a file must not grow under its
// readers. AES-128 segments are served decrypted: their keys, fetched here
// (same origin as their playlist only, as credentials are), are held in
// memory by the SegmentedVOD, never written anywhere. Read at mount (from
// the saved playlists when there are, then again in the background); each
// playlist and each key is one GET.
import Foundation
import MediaStore
import MediaSupport
import MediaNetwork

public enum HLSListing {
    /// Which variant of a master playlist becomes the file.
    public enum VariantChoice: Equatable, Sendable {
        case highest, lowest
        /// The variant of this height; else the tallest below it; else the shortest.
        case height(Int64)

        /// `highest`, `lowest` or a height such as `720`.
        package init?(_ text: String) {
            switch text.lowercased() {
            case "highest": self = .highest
            case "lowest": self = .lowest
            default:
                let digits = text.lowercased().hasSuffix("p") ? String(text.dropLast()) : text
                guard let height = Int64(digits), (1...100_000).contains(height) else { return nil }
                self = .height(height)
            }
        }
    }

    /// The files of the playlist at `url` whose text is `text`; `name`, if
    /// given, is the main file's name (an extension is added when it has none).
    package static func sources(url: String, text: String, name: String?, in context: ListingContext) throws -> [Source] {
        let origin = MediaError.redacted(url)
        let stem = name.map(stripped) ?? playlistStem(url)
        switch try HLSPlaylist.parse(text, base: url, origin: origin) {
        case .media(let media):
            return [try source(url: url, media: media, stem: stem, suffix: "", origin: origin, in: context)]
        case .master(let master):
            let variant = choose(master.variants, context.hlsVariant)
            Log.info("\(origin): variant \(MediaError.redacted(variant.url)) (BANDWIDTH=\(variant.bandwidth)"
                     + "\(variant.height.map { ", height \($0)" } ?? ""))")
            var sources = [try mediaSource(url: variant.url, stem: stem, suffix: "", in: context)]
            let audio = master.renditions.filter { rendition in
                rendition.type == "AUDIO" && (variant.audioGroup == nil || rendition.group == variant.audioGroup)
                    && rendition.url != variant.url
            }
            for rendition in audio {
                let label = FileNaming.safe(rendition.language ?? rendition.name ?? rendition.group)
                sources.append(try mediaSource(url: rendition.url, stem: stem, suffix: ".audio-\(label)", in: context))
            }
            return sources
        }
    }

    private static func mediaSource(url: String, stem: String, suffix: String, in context: ListingContext) throws -> Source {
        let origin = MediaError.redacted(url)
        let text: String
        do {
            text = try context.fetchText(url)
        } catch let error as MediaError {
            throw MediaError(error.errno, "media playlist \(error.message)")
        }
        guard case .media(let media) = try HLSPlaylist.parse(text, base: url, origin: origin) else {
            throw MediaError(EINVAL, "\(origin): a variant is itself a master playlist")
        }
        return try source(url: url, media: media, stem: stem, suffix: suffix, origin: origin, in: context)
    }

    static func source(url: String, media: HLSPlaylist.Media, stem: String, suffix: String, origin: String,
                       in context: ListingContext) throws -> Source {
        guard media.ends else {
            throw MediaError(EINVAL, "\(origin): a live HLS playlist (no #EXT-X-ENDLIST and not PLAYLIST-TYPE:VOD); "
                             + "mediafs serves video on demand only, as a file that does not grow")
        }
        guard !media.segments.isEmpty else { throw MediaError(EINVAL, "\(origin): an HLS playlist without segments") }
        let parts = (media.map.map { [$0] } ?? []) + media.segments
        let (ext, type) = container(media)
        var keys: [String: [UInt8]] = [:]
        for keyURL in Set(media.segments.compactMap { $0.encryption?.keyURL }) {
            do {
                keys[keyURL] = try key(at: keyURL, playlist: url, in: context)
            } catch let error as MediaError where context.keysMayFail {
                Log.warning("\(origin): its key cannot be fetched (\(error.message)): its encrypted segments' reads "
                            + "fail with EIO until the playlist is read again with its server up")
            }
        }
        let vod = SegmentedVOD(url: url, parts: parts, contentType: type, keys: keys)
        var info: ContentInfo?
        if let lengths = vod.listedLengths {
            do {
                info = vod.info(try vod.layout(lengths: lengths))
            } catch let error as MediaError {
                throw MediaError(EINVAL, "\(origin): \(error.message)")
            }
        }
        return Source(name: stem + suffix + "." + ext, url: url, kind: .vod(vod, info))
    }

    /// An AES-128 key: 16 bytes from the playlist's own origin (scheme,
    /// host and port), so a playlist cannot send the mount's credentials
    /// elsewhere. Errors name the key's URL, never its bytes.
    static func key(at keyURL: String, playlist: String, in context: ListingContext) throws -> [UInt8] {
        let shown = MediaError.redacted(keyURL)
        guard let key = HTTPOrigin(url: keyURL), let own = HTTPOrigin(url: playlist), key == own else {
            throw MediaError(EACCES, "\(MediaError.redacted(playlist)): key \(shown) is not on the playlist's origin; "
                             + "keys are fetched from the playlist's own scheme, host and port only")
        }
        let answer = try context.fetch(FetchRequest(url: keyURL), 64)
        guard (200..<300).contains(answer.status) else { throw MediaError(EACCES, "key \(shown): HTTP \(answer.status)") }
        guard answer.body.count == AES128CBC.blockSize else {
            throw MediaError(EINVAL, "key \(shown): \(answer.body.count) bytes, not the 16 of an AES-128 key")
        }
        return Array(answer.body)
    }

    /// The extension and type of the concatenated segments.
    static func container(_ media: HLSPlaylist.Media) -> (String, String) {
        if media.map != nil { return ("mp4", "video/mp4") }
        let path = MediaURL(media.segments[0].url)?.decodedPath.lowercased() ?? ""
        if path.hasSuffix(".aac") { return ("aac", "audio/aac") }
        if path.hasSuffix(".mp4") || path.hasSuffix(".m4s") { return ("mp4", "video/mp4") }
        return ("ts", "video/mp2t")
    }

    /// An audio-only variant (no RESOLUTION) is chosen only when no variant has video.
    static func choose(_ all: [HLSPlaylist.Variant], _ choice: VariantChoice) -> HLSPlaylist.Variant {
        let video = all.filter { $0.height != nil }
        let variants = video.isEmpty ? all : video
        switch choice {
        case .highest: return variants.max { $0.bandwidth < $1.bandwidth }!
        case .lowest: return variants.min { $0.bandwidth < $1.bandwidth }!
        case .height(let height):
            let tall = variants.filter { ($0.height ?? 0) == height }
            if let best = tall.max(by: { $0.bandwidth < $1.bandwidth }) { return best }
            let below = variants.filter { ($0.height ?? 0) < height }
            if let best = below.max(by: { ($0.height ?? 0, $0.bandwidth) < ($1.height ?? 0, $1.bandwidth) }) { return best }
            return variants.min { ($0.height ?? 0, $0.bandwidth) < ($1.height ?? 0, $1.bandwidth) }!
        }
    }

    /// `https://h/talk/index.m3u8` → `index`.
    static func playlistStem(_ url: String) -> String {
        let path = MediaURL(url)?.decodedPath ?? ""
        let last = path.split(separator: "/").last.map(String.init) ?? "playlist"
        return stripped(last)
    }

    private static func stripped(_ name: String) -> String {
        for ext in [".m3u8", ".m3u", ".ts", ".mp4", ".aac"] where name.lowercased().hasSuffix(ext) && name.count > ext.count {
            return String(name.dropLast(ext.count))
        }
        return name
    }
}
