// The last listing of a listed directory, kept in the cache so a remount
// lists it at once with no request (the refresh then runs in the
// background): `<cache-dir>/listings/<sha256(url)>`. One line an entry,
// fields split by tabs and percent-escaped (`%`, tab, CR, LF), written and
// read a buffer at a time, not by a JSON encoder, which holds the listing
// twice over at the mount's peak (decision 0032). Written whole to a
// temporary file and renamed, so a reader finds the old listing or the new
// one; not synced, since a listing lost in a crash costs only one request.
// Read back with every number bounded: a damaged or hostile file is no
// listing (a miss), a bad entry is dropped.
import Foundation
import MediaSupport
#if canImport(Glibc)
import Glibc
#endif

package struct SavedListing: Equatable, Sendable {
    package static let currentVersion = 1
    /// A saved listing larger than this is not read (a listing of a million
    /// names is about 150 MB).
    package static let maxBytes = 256 << 20

    package struct Entry: Equatable, Sendable {
        package var name: String
        package var url: String
        package var isDirectory: Bool
        /// What the listing knew of a file; nil: nothing.
        package var info: ContentInfo?

        package init(name: String, url: String, isDirectory: Bool, info: ContentInfo?) {
            self.name = name
            self.url = url
            self.isDirectory = isDirectory
            self.info = info
        }
    }

    /// The directory's URL: a file found under another URL's name is not its listing.
    package var url: String
    package var entries: [Entry]

    package init(url: String, entries: [Entry]) {
        self.url = url
        self.entries = entries
    }
}

extension SavedListing {
    static let magic = "mediafs-listing"

    /// `%`, tab, CR and LF escaped, so a field holds no separator.
    static func escape(_ field: String, into out: inout [UInt8]) {
        for byte in field.utf8 {
            switch byte {
            case UInt8(ascii: "%"), 9, 10, 13:
                let hex = Array("0123456789ABCDEF".utf8)
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 15)]]
            default:
                out.append(byte)
            }
        }
    }

    static func unescape(_ field: Substring.UTF8View) -> String? {
        guard field.contains(UInt8(ascii: "%")) else { return String(Substring(field)) }
        var bytes: [UInt8] = []
        var iterator = field.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                return nil
            }
            bytes.append(high << 4 | low)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        default: return nil
        }
    }

    /// One entry's line: `d NAME URL`, `f NAME URL` (nothing known) or
    /// `i NAME URL LENGTH RANGES ETAG LAST-MODIFIED TYPE` (an absent
    /// validator is an empty field).
    func line(_ entry: Entry, into out: inout [UInt8]) {
        out.append(entry.isDirectory ? UInt8(ascii: "d") : entry.info == nil ? UInt8(ascii: "f") : UInt8(ascii: "i"))
        for field in [entry.name, entry.url] {
            out.append(9)
            Self.escape(field, into: &out)
        }
        if let info = entry.info, !entry.isDirectory {
            out += Array("\t\(info.length)\t\(info.acceptsRanges ? 1 : 0)".utf8)
            for field in [info.etag, info.lastModified, info.contentType] {
                out.append(9)
                // A present but empty validator is saved as absent: no server sends one.
                Self.escape(field ?? "", into: &out)
            }
        }
        out.append(10)
    }

    /// The entry of one line; nil for a line that is not one (dropped).
    static func entry(_ line: Substring) -> Entry? {
        let fields = line.utf8.split(separator: 9, omittingEmptySubsequences: false)
        guard fields.count >= 3, let kind = fields[0].first, fields[0].count == 1,
              let name = unescape(fields[1]), let url = unescape(fields[2]), !name.isEmpty, !url.isEmpty else {
            return nil
        }
        switch kind {
        case UInt8(ascii: "d") where fields.count == 3:
            return Entry(name: name, url: url, isDirectory: true, info: nil)
        case UInt8(ascii: "f") where fields.count == 3:
            return Entry(name: name, url: url, isDirectory: false, info: nil)
        case UInt8(ascii: "i") where fields.count == 8:
            guard let length = Int64(Substring(fields[3])), (0...Limits.maxLength).contains(length),
                  let ranges = Int(Substring(fields[4])), ranges == 0 || ranges == 1,
                  let etag = unescape(fields[5]), let modified = unescape(fields[6]),
                  let type = unescape(fields[7]) else { return nil }
            return Entry(name: name, url: url, isDirectory: false,
                         info: ContentInfo(length: length, contentType: type.isEmpty ? nil : type,
                                           etag: etag.isEmpty ? nil : etag,
                                           lastModified: modified.isEmpty ? nil : modified,
                                           acceptsRanges: ranges == 1))
        default:
            return nil
        }
    }
}

extension CacheStore {
    /// Bytes of a saved listing written at a time: its lines are not held whole.
    static let saveBuffer = 128 << 10

    private var listingsDirectory: String { root + "/listings" }

    private func listingPath(forURL url: String) -> String {
        listingsDirectory + "/" + SHA256.hex(url)
    }

    /// Keeps a directory's listing, replacing the last one.
    package func saveListing(_ listing: SavedListing) throws {
        mkdir(listingsDirectory, 0o700)
        let path = listingPath(forURL: listing.url)
        let temp = path + ".tmp\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
        let shown = MediaError.redacted(listing.url)
        let fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw MediaError.system("create the saved listing of \(shown)") }
        var buffer: [UInt8] = []
        buffer.reserveCapacity(Self.saveBuffer)
        var failed: MediaError?
        func drain() {
            guard failed == nil, !buffer.isEmpty else { return }
            let written = buffer.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if written != buffer.count { failed = MediaError.system("write the saved listing of \(shown)") }
            buffer.removeAll(keepingCapacity: true)
        }
        buffer += Array("\(SavedListing.magic) \(SavedListing.currentVersion)\t".utf8)
        SavedListing.escape(listing.url, into: &buffer)
        buffer.append(10)
        for entry in listing.entries {
            listing.line(entry, into: &buffer)
            if buffer.count >= Self.saveBuffer { drain() }
        }
        drain()
        close(fd)
        if let failed {
            unlink(temp)
            throw failed
        }
        guard rename(temp, path) == 0 else {
            let error = MediaError.system("rename the saved listing of \(shown)")
            unlink(temp)
            throw error
        }
    }

    /// The listing kept for a directory, nil when none is or it cannot be
    /// read as one (another version, damaged, or another URL's). A line
    /// that is not an entry is dropped, the others kept.
    package func loadListing(url: String) -> SavedListing? {
        let path = listingPath(forURL: url)
        var st = stat()
        guard lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, st.st_size <= SavedListing.maxBytes,
              let data = FileManager.default.contents(atPath: path) else { return nil }
        let text = String(decoding: data, as: UTF8.self)
        var lines = text.split(separator: "\n", omittingEmptySubsequences: true).makeIterator()
        var header = "\(SavedListing.magic) \(SavedListing.currentVersion)\t".utf8.map { $0 }
        SavedListing.escape(url, into: &header)
        guard let first = lines.next(), Array(first.utf8) == header else {
            Log.warning("the saved listing of \(MediaError.redacted(url)) is not one: listing it again")
            return nil
        }
        var entries: [SavedListing.Entry] = []
        var dropped = 0
        while let line = lines.next() {
            if let entry = SavedListing.entry(line) { entries.append(entry) } else { dropped += 1 }
        }
        if dropped > 0 { Log.warning("the saved listing of \(MediaError.redacted(url)): \(dropped) damaged lines dropped") }
        return SavedListing(url: url, entries: entries)
    }

    /// Forgets a directory's saved listing.
    package func removeListing(url: String) {
        unlink(listingPath(forURL: url))
    }
}
