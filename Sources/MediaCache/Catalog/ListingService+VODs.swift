// VODs a listing shows: an http(s) entry whose name ends in `.m3u8` or
// `.m3u` and whose text is an HLS playlist, or whose name ends in `.mpd`,
// becomes its VOD's files, as the same URL given on the command line does
// (`talk.m3u8` beside `notes.bin` is `talk.ts`, or `talk.mp4` and its audio
// renditions' files). The mount's SegmentedFetcher serves each from then on.
// Each refresh reads the playlists again (one GET each, more for a master
// playlist): a playlist that changed is another version of its file. One
// that cannot be read, or is not HLS, stays the plain file the listing
// shows, with a warning naming it. The playlists are saved as fetched
// (SavedPresentations), so a remount shows a listing's VODs at once from
// its saved listing, their server up or gone.
import Foundation
import MediaSources
import MediaSupport

extension ListingService {
    /// `sources` with each VOD among them replaced by its files, and the
    /// URLs of the VODs whose playlists changed since the last listing.
    func withVODs(_ sources: [Source], of listing: any Listing) -> (shown: [Source], changed: [String]) {
        guard sources.contains(where: { !$0.isDirectory && Presentation.mayName($0.url) }) else { return (sources, []) }
        var shown: [Source] = []
        var changed: [String] = []
        shown.reserveCapacity(sources.count)
        for source in sources {
            guard !source.isDirectory, Presentation.mayName(source.url) else {
                shown.append(source)
                continue
            }
            do {
                guard let files = try SavedPresentations(store: store).live(context, { try Presentation.files(of: source, in: $0) })
                else {
                    shown.append(source)
                    continue
                }
                // Registered only once the whole presentation was read.
                changed += register(files)
                shown += files.map { file in
                    var safe = file
                    safe.name = FileNaming.safe(file.name)
                    return safe
                }
            } catch {
                let message = (error as? MediaError)?.message ?? "\(error)"
                Log.warning("\(listing.origin): \(source.name): \(message); shown as the playlist file itself")
                shown.append(source)
            }
        }
        return (shown, changed)
    }

    /// Has the loaders of VODs whose playlists changed check their version
    /// now (their length and validator are their parts'): a file whose
    /// listing gives no lengths would else go on being the old version
    /// until its next revalidation. The check asks the new parts' lengths.
    func revalidateChanged(_ urls: [String]) {
        for url in urls {
            guard let loader = state.withLock({ $0.loaders[url] }) else { continue }
            if loader.revalidate(olderThan: 0) { Log.info("\(MediaError.redacted(url)): its playlist changed") }
        }
    }

    /// The files of the VODs among a saved listing's entries, read from
    /// their saved playlists with no request and served from now on; a VOD
    /// whose playlists were never saved is left out until the refresh
    /// reads it.
    func savedVODs(_ sources: [Source]) -> [Source] {
        let saved = SavedPresentations(store: store)
        var shown: [Source] = []
        for source in sources {
            guard let files = saved.offline(context, { try Presentation.files(of: source, in: $0) }) else { continue }
            for vod in files.compactMap(\.vod) { fetcher.register(vod) }
            shown += files.map { file in
                var safe = file
                safe.name = FileNaming.safe(file.name)
                return safe
            }
        }
        return shown
    }
}
