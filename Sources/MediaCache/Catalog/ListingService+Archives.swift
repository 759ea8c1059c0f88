// Archives a listing shows: a RAR volume set (`film.part01.rar …`, or
// `film.rar` with `film.r00 …`) or a `.zip` becomes a folder named after
// the set, holding the members that can be served by range (stored, not
// encrypted, every volume present), and its volumes leave the listing.
// Indexing reads each volume's head at once (ArchiveReader) when the
// listing is read; the members are registered with the mount's
// SegmentedFetcher, which serves them from their volumes' ranges. A set
// with no member to serve, or that cannot be indexed, stays its volumes,
// with one log line naming it and why; members it refuses are named in
// the log too. `--archives off` leaves every volume a plain file.
// Each index is saved (SavedArchiveIndex) so a remount's saved listing shows
// the folders at once, with no request (`fromSaved`); the refresh then
// indexes the volumes again, so a volume that changed makes its members
// new versions.
import Foundation
import MediaStore
import MediaSources
import MediaSupport

extension ListingService {
    /// `sources` with each archive among them replaced by its folder: read
    /// from the volumes, or with `fromSaved` from the index saved when they
    /// last were (a set with none stays its volumes until the refresh).
    func withArchives(_ sources: [Source], of listing: any Listing, fromSaved: Bool = false) -> [Source] {
        guard archives else { return sources }
        // Only names that may be an archive's are looked at: a dictionary of
        // every entry raises a big listing's peak memory (decision 0025).
        let candidates = sources.filter { !$0.isDirectory && RARVolumeSet.mayNameAnArchive($0.name) }
        guard !candidates.isEmpty else { return sources }
        let files = Dictionary(candidates.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        var sets = RARVolumeSet.group(Array(files.keys)).map { (folder: $0.folder, format: ArchiveReader.Format.rar, names: $0.names) }
        for name in files.keys where name.lowercased().hasSuffix(".zip") && name.count > 4 {
            sets.append((String(name.dropLast(4)), .zip, [name]))
        }
        guard !sets.isEmpty else { return sources }
        var folders: [String: Source] = [:]
        var archive: ArchiveFolder?
        var hidden = Set<String>()
        for set in sets.sorted(by: { $0.names[0] < $1.names[0] }) {
            let volumes = set.names.compactMap { files[$0] }.map { ArchiveReader.Volume(name: $0.name, url: $0.url) }
            let shown = "\(listing.origin): archive \(set.names[0])"
            let key = SavedArchiveIndex.key(forFirstVolume: volumes[0].url)
            do {
                let read: ArchiveReader.Result
                let saved = store.loadDocument(url: key).flatMap { SavedArchiveIndex.decode($0, urls: volumes.map(\.url)) }
                if fromSaved {
                    guard let saved else { continue }
                    read = saved
                } else if let saved, Self.listingShowsUnchanged(set.names.compactMap { files[$0]?.listedInfo }, saved) {
                    // A refresh of a big library must not read every set again.
                    read = saved
                } else {
                    read = try ArchiveReader.index(set.format, volumes: volumes, fetcher: fetcher,
                                                   timeout: Double(settings.timeout), clock: settings.clock)
                    do {
                        try store.saveDocument(url: key, text: SavedArchiveIndex.encode(read, urls: volumes.map(\.url)))
                    } catch {
                        Log.warning("\(shown): \((error as? MediaError)?.message ?? "\(error)"); a remount indexes it again")
                    }
                }
                for refused in read.index.refused {
                    Log.warning("\(shown): \(refused.name) is not shown: \(refused.reason)")
                }
                let members = ArchiveFolder.members(of: read.index, volumes: volumes.map(\.url), validators: read.volumes)
                guard !members.isEmpty else {
                    Log.warning("\(shown): no member can be read by range; its volumes are shown as files")
                    continue
                }
                var changed: [String] = []
                for member in members {
                    if let vod = member.source.vod, fetcher.register(vod) == .replaced { changed.append(vod.url) }
                }
                revalidateChanged(changed)
                let folder = ArchiveFolder(url: volumes[0].url, members: members, prefix: [])
                archive = folder
                // The folder's URL names this version of the index: another
                // one is another folder, listed anew, whose members' new
                // sizes and validators replace their cached bytes.
                let version = SHA256.hex(members.compactMap { $0.source.listedInfo?.etag }.joined(separator: " ")).prefix(16)
                folders[set.names[0]] = Source(name: set.folder, url: volumes[0].url + "#archive=\(version)",
                                               kind: .directory(folder))
                hidden.formUnion(set.names)
                Log.debug("\(shown): \(members.count) members in \(read.rounds) rounds of reads")
            } catch {
                let message = (error as? ArchiveRefusal).map { "\($0)" } ?? (error as? MediaError)?.message ?? "\(error)"
                Log.warning("\(shown): \(message); its volumes are shown as files")
            }
        }
        // An archive named by its URL is the directory of its members.
        if listing is ArchiveSource, folders.count == 1, let archive {
            return archive.entries
        }
        // The folder where the set's first volume was, the other volumes gone.
        return sources.compactMap { source in
            guard !source.isDirectory else { return source }
            if let folder = folders[source.name] { return folder }
            return hidden.contains(source.name) ? nil : source
        }
    }

    /// Whether what a listing says of every volume (WebDAV's and S3's
    /// sizes and ETags) matches what their heads were answered with when
    /// the saved index was made: then it still holds, with no request. A
    /// listing that gives no size (most HTML indexes), or a size alone
    /// (nginx's), never says so: a volume rewritten at its length would
    /// keep the old index.
    static func listingShowsUnchanged(_ listed: [ContentInfo], _ saved: ArchiveReader.Result) -> Bool {
        guard listed.count == saved.volumes.count else { return false }
        return zip(listed, saved.volumes).allSatisfy { info, volume in
            info.length == volume.length && (info.etag != nil || info.lastModified != nil)
                && (info.etag == nil || volume.etag == nil || info.etag == volume.etag)
        }
    }
}
