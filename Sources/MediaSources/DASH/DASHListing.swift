// A static DASH MPD as files: its video adaptation set's chosen
// representation (`--hls-variant` chooses for DASH too) becomes `NAME.mp4`
// (initialization segment, then media segments: a fragmented MP4), and each
// audio adaptation set's highest-bandwidth representation a file beside it
// (`NAME.audio-LANG.mp4`). Each is a SegmentedVOD whose URL is the MPD's
// with `#rep=ID`: a cache key of its own, never sent (SegmentedFetcher
// answers every request for it). Read at mount (from its saved copy when
// there is one, then again in the background); the MPD is one GET.
import Foundation
import MediaStore
import MediaSupport
import MediaNetwork

package struct DASHListing: Listing {
    package let url: String
    /// The name a list file gave it, for the main file.
    package let name: String?

    package init(url: String, name: String? = nil) {
        self.url = url
        self.name = name
    }

    package var origin: String { MediaError.redacted(url) }
    package var refreshes: Bool { false }

    /// Whether a SOURCE names an MPD, by its URL's extension.
    package static func isMPD(_ source: String) -> Bool {
        MediaURL(source)?.decodedPath.lowercased().hasSuffix(".mpd") ?? false
    }

    package func list(in context: ListingContext) throws -> [Source] {
        let text: String
        do {
            text = try context.fetchText(url)
        } catch let error as MediaError {
            throw MediaError(error.errno, "DASH MPD \(error.message)")
        }
        return try Self.sources(url: url, xml: Data(text.utf8), name: name, in: context)
    }

    static func sources(url: String, xml: Data, name: String?, in context: ListingContext) throws -> [Source] {
        let manifest = try DASHManifest.parse(xml, base: url, origin: MediaError.redacted(url))
        let stem = name.map(stripped) ?? stripped(MediaURL(url)?.decodedPath.split(separator: "/").last.map(String.init) ?? "manifest")
        let video = manifest.adaptationSets.filter { $0.kind == "video" }
        let audio = manifest.adaptationSets.filter { $0.kind == "audio" }
        var sources: [Source] = []
        if let main = video.first ?? audio.first {
            sources.append(source(url: url, main.representations[choose(main.representations, context.hlsVariant)],
                                  name: "\(stem).mp4", type: main.kind == "audio" ? "audio/mp4" : "video/mp4"))
        }
        for set in audio where !(video.isEmpty && set == audio.first) {
            let index = choose(set.representations, .highest)
            let label = FileNaming.safe(set.language ?? set.representations[index].id)
            sources.append(source(url: url, set.representations[index], name: "\(stem).audio-\(label).mp4", type: "audio/mp4"))
        }
        guard !sources.isEmpty else { throw MediaError(EINVAL, "\(MediaError.redacted(url)): no video or audio adaptation set") }
        return sources
    }

    private static func source(url: String, _ representation: DASHManifest.Representation, name: String, type: String) -> Source {
        let key = url + "#rep=" + (representation.id.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
        let vod = SegmentedVOD(url: key, parts: representation.parts, contentType: type)
        let source = Source(name: name, url: key, kind: .vod(vod, nil))
        return source
    }

    /// The index of the representation `choice` picks, as for HLS variants.
    static func choose(_ representations: [DASHManifest.Representation], _ choice: HLSListing.VariantChoice) -> Int {
        let variants = representations.enumerated().map { index, rep in
            HLSPlaylist.Variant(url: String(index), bandwidth: rep.bandwidth, height: rep.height, audioGroup: nil)
        }
        return Int(HLSListing.choose(variants, choice).url) ?? 0
    }

    private static func stripped(_ name: String) -> String {
        for ext in [".mpd", ".mp4"] where name.lowercased().hasSuffix(ext) && name.count > ext.count {
            return String(name.dropLast(ext.count))
        }
        return name
    }
}
