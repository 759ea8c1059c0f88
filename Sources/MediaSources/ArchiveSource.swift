// An archive named by its own URL (a SOURCE argument, a list file's line,
// `mediafs add`, an `s3://bucket/key` naming one): a `.zip`, or a volume of a RAR set (`film.part1.rar`,
// `film.rar`, `film.r00`), shown as a directory of its members, as
// fuse-zip and archivemount show one. What it lists is the set's volumes;
// the catalog indexes them as it does a set found in any listing
// (ListingService+Archives) and shows the members in their place.
//
// The other volumes of a RAR set are found beside the named one: in the
// listing of its directory (an HTML index, a WebDAV collection, an S3
// prefix), or where
// that cannot be listed (a debrid or usenet link's directory seldom is)
// by asking for the next names of its numbering, `probeWave` at once,
// until one is missing. Which volume comes first is the headers' word,
// as in a listing: names only say which belong together.
import Foundation
import MediaNetwork
import MediaSupport
import MediaStore

package struct ArchiveSource: Listing {
    /// The named volume's http(s) URL.
    package let url: String
    let format: ArchiveReader.Format
    /// The named volume's file name, decoded.
    let name: String
    /// Whether it was named by a `dav(s)://` URL: its directory is then a
    /// WebDAV collection.
    let isDAV: Bool
    /// The listing of the directory it is in, when its URL does not say
    /// (an S3 object's prefix); else an HTML index or a WebDAV collection.
    package var directory: (any Listing)?
    /// What the set shows as: "film" for film.part1.rar or film.zip.
    package let folder: String

    /// Names asked for at once when the set's directory cannot be listed.
    static let probeWave = 8
    /// The most volumes a set found by probing may have (rar's own
    /// numbering stops at 99,999; this bounds what a server that answers
    /// every name can make us ask).
    static let maxProbedVolumes = 999

    /// The archive `url` names, or nil when its name is no archive's.
    package init?(url: String) {
        let http = WebDAVIndex.isDAV(url) ? WebDAVIndex.httpURL(ofDAV: url, isCollection: false) : url
        guard let parsed = MediaURL(http), !parsed.path.hasSuffix("/"), parsed.fragment == nil,
              let last = parsed.path.split(separator: "/").last else { return nil }
        let name = last.removingPercentEncoding ?? String(last)
        if name.lowercased().hasSuffix(".zip"), name.count > 4 {
            (format, folder) = (.zip, String(name.dropLast(4)))
        } else if let set = RARVolumeSet.group([name]).first {
            (format, folder) = (.rar, set.folder)
        } else if let numbered = RARVolumeSet.numbering(of: name), numbered.style == .old {
            // "film.r00" alone groups into no set (it is no first volume).
            (format, folder) = (.rar, numbered.base)
        } else {
            return nil
        }
        self.url = http
        self.name = name
        isDAV = WebDAVIndex.isDAV(url)
    }

    package var origin: String { MediaError.redacted(url) }
    package var refreshes: Bool { true }

    package func list(in context: ListingContext) throws -> [Source] {
        guard format == .rar else { return [Source(name: name, url: url)] }
        do {
            if let listed = try listedSet(in: context) { return listed }
        } catch {
            Log.debug("\(origin): its directory cannot be listed (\((error as? MediaError)?.message ?? "\(error)")); "
                      + "asking for its volumes by name")
        }
        return try probedSet(in: context)
    }

    /// The set's volumes as the listing of their directory names them (with
    /// the sizes and validators a WebDAV listing gives); nil when that
    /// listing does not hold this volume.
    private func listedSet(in context: ListingContext) throws -> [Source]? {
        guard let listing = directory ?? directoryURL.map({ url -> any Listing in
            isDAV ? WebDAVIndex(url: url) : HTMLIndex(url: url)
        }) else { return nil }
        let files = try listing.list(in: context).filter { !$0.isDirectory }
        guard let set = RARVolumeSet.group(files.map(\.name)).first(where: { $0.names.contains(name) }) else {
            return nil
        }
        let byName = Dictionary(files.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        return set.names.compactMap { byName[$0] }
    }

    /// The set's volumes found by asking for each name of its numbering
    /// (HEAD), a wave at once, up to the first one missing. The named
    /// volume is not asked for: the index reads it anyway. A URL with a
    /// query (a signed link) names no siblings: it is the set alone.
    private func probedSet(in context: ListingContext) throws -> [Source] {
        guard let numbering = RARVolumeSet.numbering(of: name), let base = directoryURL else {
            return [Source(name: name, url: url)]
        }
        var found: [Source] = []
        var next = numbering.first
        while found.count < Self.maxProbedVolumes {
            let names = (next..<(next + Self.probeWave)).map { numbering.name(number: $0) }
            next += Self.probeWave
            let urls = names.map { base + Self.encoded($0) }
            let exists = try Self.exist(zip(names, urls).map { $0 == name ? nil : $1 }, in: context)
            for ((candidate, candidateURL), there) in zip(zip(names, urls), exists) {
                guard there else {
                    guard found.contains(where: { $0.name == name }) else {
                        throw MediaError(ENOENT, "\(origin): \(candidate), a volume before it, is missing")
                    }
                    return found
                }
                found.append(Source(name: candidate, url: candidate == name ? url : candidateURL))
            }
        }
        throw MediaError(EFBIG, "\(origin): more than \(Self.maxProbedVolumes) volumes answer; not a set")
    }

    /// Whether each URL answers a HEAD (nil: known to, asked for nothing),
    /// all asked at once. 404 and 410 are no; any other failure throws.
    private static func exist(_ urls: [String?], in context: ListingContext) throws -> [Bool] {
        let answers = Locked<[Swift.Result<Bool, MediaError>]>(Array(repeating: .success(true), count: urls.count))
        let group = DispatchGroup()
        for (slot, url) in urls.enumerated() {
            guard let url else { continue }
            DispatchQueue.global().async(group: group) {
                let answer: Swift.Result<Bool, MediaError>
                do {
                    let status = try context.fetch(FetchRequest(url: url, method: .head), 0).status
                    answer = (200..<300).contains(status) ? .success(true)
                        : status == 404 || status == 410 ? .success(false)
                        : .failure(MediaError.io("\(MediaError.redacted(url)): HTTP \(status)"))
                } catch {
                    answer = .failure(error as? MediaError ?? MediaError.io("\(error)"))
                }
                answers.withLock { $0[slot] = answer }
            }
        }
        group.wait()
        return try answers.withLock { $0 }.map { try $0.get() }
    }

    /// The URL of the directory the volume is in, ending in `/`; nil for a
    /// URL with a query (a signed link: its siblings' would differ).
    private var directoryURL: String? {
        guard let parsed = MediaURL(url), parsed.query == nil else { return nil }
        return parsed.resolving("./")?.text
    }

    /// `name` as it goes in a URL's path.
    private static func encoded(_ name: String) -> String {
        name.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/;"))) ?? name
    }
}
