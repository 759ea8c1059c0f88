// How a change of a file on the server is told, in one place: from an
// answer's head (`inHead`, `wholeBody`), a revalidation's validators
// (`difference`), a listing's entry (`listed`, stricter), and when a version
// known by its length alone is confirmed rather than changed
// (`confirmation`). Pure: the loader acts on the reason given
// (FileLoader.replaceContent); decisions 0006 and 0038.
import Foundation
import MediaNetwork
import MediaStore
import MediaSources

enum ChangeDetection {
    /// A version known by its length alone (an nginx index gives no
    /// validator) takes the validators of the server's first answer of that
    /// length, and its type: with nothing of the file cached (`hasBytes`)
    /// or answered in ranges (`sawPartial`) yet, there is no older version
    /// to mix with, and counting the validators' arrival as a change would
    /// fail the very read that asked. Returns the version confirmed, or nil
    /// (then `difference` judges).
    static func confirmation(of known: ContentInfo, by answered: ContentInfo, sawPartial: Bool, hasBytes: Bool)
        -> ContentInfo? {
        guard known.etag == nil, known.lastModified == nil, answered.etag != nil || answered.lastModified != nil,
              answered.length == known.length, !sawPartial, !hasBytes else { return nil }
        var confirmed = known
        confirmed.etag = answered.etag
        confirmed.lastModified = answered.lastModified
        confirmed.contentType = known.contentType ?? answered.contentType
        return confirmed
    }

    /// What an answer's head says of the file, for `confirmation`: its
    /// info, or for a range whose Content-Range names no total (an SFTP or
    /// FTP read: RemoteFileHead; the total is the listing's) the length
    /// known with the head's validators.
    static func answered(_ head: ResponseHead, known: ContentInfo) -> ContentInfo? {
        if let info = ContentProbe.info(from: head) { return info }
        guard head.status == 206, let range = head.contentRange, range.total == nil,
              range.range.upperBound <= known.length else { return nil }
        return ContentInfo(length: known.length, contentType: head.contentType, etag: head.etag,
                           lastModified: head.lastModified, acceptsRanges: true)
    }

    /// Why a listing's `listed` shows another version than `known`, or nil.
    /// Stricter than `difference`: a listing is a second view of the file,
    /// made by other code on the server, so what it lacks is not known to
    /// be gone. A change is another length; another ETag where both carry
    /// one (weak or strong alike: a listing may give the strong form of
    /// what a GET answered weakly); else, where both carry a date, another
    /// second (S3 lists milliseconds that Last-Modified drops).
    static func listed(_ listed: ContentInfo, against known: ContentInfo) -> String? {
        if listed.length != known.length {
            return "length \(known.length) became \(listed.length)"
        }
        if let old = known.etag.map(strongETag), let new = listed.etag.map(strongETag) {
            return old == new ? nil : "ETag \(old) became \(new)"
        }
        guard let old = known.lastModified, let new = listed.lastModified,
              let before = HTTPDate.seconds(old), let after = HTTPDate.seconds(new), before != after else { return nil }
        return "Last-Modified \(old) became \(new)"
    }

    /// An ETag without its weak prefix.
    static func strongETag(_ etag: String) -> String {
        etag.hasPrefix("W/") ? String(etag.dropFirst(2)) : etag
    }

    /// Why an answer's head shows the remote file changed, or nil (see
    /// `difference`); the length is the whole body's, or a range's total.
    /// Only a 2xx answer describes the file: an error page's validators
    /// (often none) are the page's.
    static func inHead(_ head: ResponseHead, against info: ContentInfo) -> String? {
        guard (200..<300).contains(head.status) else { return nil }
        let length = head.status == 206 ? head.contentRange?.total : head.status == 200 ? head.contentLength : nil
        return difference(from: info, etag: head.etag, lastModified: head.lastModified, length: length)
    }

    /// Why validators seen now show another version than `known`, or nil.
    /// A change is another length; another ETag; an ETag that appeared or
    /// disappeared, unless both sides carry the same Last-Modified (a
    /// proxy that drops ETags: the same file); another Last-Modified where
    /// neither side has an ETag. A validator gone with nothing left to
    /// compare is taken as a change: dropping the cache costs a fetch, a
    /// mix of two versions costs the reader its file.
    static func difference(from known: ContentInfo, etag: String?, lastModified: String?, length: Int64?) -> String? {
        if let length, length != known.length {
            return "length \(known.length) became \(length)"
        }
        switch (known.etag, etag) {
        case let (old?, new?):
            return old == new ? nil : "ETag \(old) became \(new)"
        case (nil, nil):
            guard lastModified != known.lastModified else { return nil }
            return "Last-Modified \(known.lastModified ?? "none") became \(lastModified ?? "none")"
        case (let old, let new):
            if let lastModified, lastModified == known.lastModified { return nil }
            return "ETag \(old ?? "none") became \(new ?? "none"), Last-Modified \(known.lastModified ?? "none") "
                + "became \(lastModified ?? "none")"
        }
    }

    /// Why a 200 answered to a range request means another version, or
    /// nil. After 206s of this version (or with bytes of it cached), a
    /// 200 to If-Range is the server saying the validator no longer
    /// matches; one to a request without If-Range (the file has no
    /// validators) is ambiguous, and taken as a change too: taken for a
    /// server that ignores Range, the new body would be cached and handed
    /// out beside the old bytes. A server that really ignores Range then
    /// answers 200 again, with nothing of the old version left to mix.
    static func wholeBody(_ head: ResponseHead, askedWithIfRange ifRange: Bool, after partials: Bool) -> String? {
        guard head.status == 200, partials else { return nil }
        return ifRange ? "a 200 with the whole body answered a range request with If-Range"
            : "a 200 with the whole body answered a range request, after 206s"
    }
}
