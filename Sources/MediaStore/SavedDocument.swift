// Documents a VOD is made of, as last fetched: an HLS playlist's text (a
// master's and its media playlists'), a DASH MPD's, kept so a remount
// parses them again with no request and serves the VOD with its server
// gone (`<cache-dir>/documents/<sha256(url)>`), and the lengths of a VOD's
// segments once learned (`<cache-dir>/segment-lengths/<sha256(url)>`),
// which the playlist does not give and which took a request each. A key
// is never one of them: AES-128 keys stay in memory.
// Written whole to a temporary file and renamed, not synced (a document
// lost in a crash costs a request). Read back bounded: a file too large, of
// another URL, damaged or of another version is a miss.
import Foundation
import MediaSupport
#if canImport(Glibc)
import Glibc
#endif

package enum SavedDocument {
    package static let currentVersion = 1
    /// A playlist of a 10-hour VOD in 2 s segments is about 2 MB; an MPD
    /// with a SegmentList for each representation can be a few times that.
    package static let maxBytes = 32 << 20
    /// A VOD's parts (a day in 1 s segments is 86,400).
    package static let maxParts = 1_000_000

    static let documentMagic = "mediafs-document"
    static let lengthsMagic = "mediafs-segment-lengths"
}

extension CacheStore {
    private var documentsDirectory: String { root + "/documents" }
    private var lengthsDirectory: String { root + "/segment-lengths" }

    /// Keeps the text fetched from `url`, replacing the last one.
    package func saveDocument(url: String, text: String) throws {
        var bytes = header(SavedDocument.documentMagic, url)
        bytes += Array(text.utf8)
        try writeWhole(bytes, directory: documentsDirectory, url: url, what: "the saved document")
    }

    /// The text last saved for `url`; nil when none is, or it is not one.
    package func loadDocument(url: String) -> String? {
        guard let body = readWhole(directory: documentsDirectory, url: url, magic: SavedDocument.documentMagic) else {
            return nil
        }
        return String(decoding: body, as: UTF8.self)
    }

    /// Keeps the lengths of a VOD's parts, for the version of its parts
    /// that `digest` names.
    package func saveSegmentLengths(url: String, digest: String, lengths: [Int64]) throws {
        var bytes = header(SavedDocument.lengthsMagic, url)
        bytes += Array(digest.utf8)
        bytes.append(10)
        bytes += Array(lengths.map(String.init).joined(separator: ",").utf8)
        try writeWhole(bytes, directory: lengthsDirectory, url: url, what: "the saved segment lengths")
    }

    /// The lengths saved for `url`'s parts when they were of the version
    /// `digest` names, `count` of them, each within `Limits.maxLength`;
    /// nil otherwise.
    package func loadSegmentLengths(url: String, digest: String, count: Int) -> [Int64]? {
        guard count > 0, count <= SavedDocument.maxParts,
              let body = readWhole(directory: lengthsDirectory, url: url, magic: SavedDocument.lengthsMagic),
              let newline = body.firstIndex(of: 10), Array(body[..<newline]) == Array(digest.utf8) else { return nil }
        let fields = body[(newline + 1)...].split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false)
        guard fields.count == count else { return nil }
        var lengths: [Int64] = []
        lengths.reserveCapacity(count)
        for field in fields {
            guard field.count <= 19, let length = Int64(String(decoding: field, as: UTF8.self)),
                  Limits.isLength(length) else { return nil }
            lengths.append(length)
        }
        return lengths
    }

    private func header(_ magic: String, _ url: String) -> [UInt8] {
        var bytes = Array("\(magic) \(SavedDocument.currentVersion)\t".utf8)
        SavedListing.escape(url, into: &bytes)
        bytes.append(10)
        return bytes
    }

    private func writeWhole(_ bytes: [UInt8], directory: String, url: String, what: String) throws {
        mkdir(directory, 0o700)
        let path = directory + "/" + SHA256.hex(url)
        let temp = path + ".tmp\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
        let shown = MediaError.redacted(url)
        let fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw MediaError.system("create \(what) of \(shown)") }
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        guard written == bytes.count else {
            let error = MediaError.system("write \(what) of \(shown)")
            unlink(temp)
            throw error
        }
        guard rename(temp, path) == 0 else {
            let error = MediaError.system("rename \(what) of \(shown)")
            unlink(temp)
            throw error
        }
    }

    /// The bytes after the header of `directory`'s file for `url`.
    private func readWhole(directory: String, url: String, magic: String) -> ArraySlice<UInt8>? {
        let path = directory + "/" + SHA256.hex(url)
        var st = stat()
        guard lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, st.st_size <= SavedDocument.maxBytes,
              let data = FileManager.default.contents(atPath: path) else { return nil }
        let bytes = [UInt8](data)
        let expected = header(magic, url)
        guard bytes.starts(with: expected) else {
            Log.warning("\(path) is not a saved copy of \(MediaError.redacted(url)): fetching it again")
            return nil
        }
        return bytes[expected.count...]
    }
}
