// The documents VODs are read from (HLS playlists, DASH MPDs, a playlist of
// files served over http), kept in the cache as fetched, so a VOD is read
// again at a remount with no request: with its server gone it is served
// from what the cache holds, with its server up it is read again in the
// background, as a listing is refreshed. The parse is the same code either
// way: only where the texts come from differs. A document is saved only
// once what was read from it parsed, so a saved set is always one that
// made files. Keys are never documents: read offline, a VOD's keys are
// fetched as ever, and one that cannot be leaves its encrypted parts
// unreadable (EIO) rather than failing the mount.
import Foundation
import MediaStore
import MediaSupport
import MediaNetwork

package struct SavedPresentations: Sendable {
    let store: CacheStore

    package init(store: CacheStore) {
        self.store = store
    }

    /// Reads the sources of a presentation: the parse of its documents,
    /// fetched through the context it is given; nil when the documents
    /// name no presentation (an M3U of songs among a listing's files).
    package typealias Read = (ListingContext) throws -> [Source]?

    /// What `read` makes of the documents saved when it last succeeded,
    /// with no request for them; nil when one of them was never saved (or
    /// is damaged) or they no longer parse.
    package func offline(_ context: ListingContext, _ read: Read) -> [Source]? {
        var offline = context
        let store = self.store
        offline.fetchText = { url in
            guard let text = store.loadDocument(url: url) else {
                throw MediaError(ENOENT, "\(MediaError.redacted(url)) was never saved")
            }
            return text
        }
        offline.keysMayFail = true
        do {
            return try read(offline)
        } catch {
            Log.debug("saved documents: \((error as? MediaError)?.message ?? "\(error)"); reading them from the network")
            return nil
        }
    }

    /// What `read` makes of the documents fetched now; each is saved once
    /// the whole read made files.
    package func live(_ context: ListingContext, _ read: Read) throws -> [Source]? {
        let fetched = Locked<[(url: String, text: String)]>([])
        var recording = context
        let fetch = context.fetchText
        recording.fetchText = { url in
            let text = try fetch(url)
            fetched.withLock { $0.append((url, text)) }
            return text
        }
        guard let sources = try read(recording) else { return nil }
        for (url, text) in fetched.withLock({ $0 }) {
            do {
                try store.saveDocument(url: url, text: text)
            } catch {
                Log.warning("\((error as? MediaError)?.message ?? "\(error)"); a remount needs its server to read it")
            }
        }
        return sources
    }
}
