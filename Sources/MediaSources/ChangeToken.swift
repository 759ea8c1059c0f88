// What a listed directory's server said of it when it was last listed or
// polled (`--poll-interval`, decision 0049), kept small so a library of
// thousands of directories costs a few bytes each: a digest to compare, and
// the validators an HTML page came with, for a conditional GET. A poll's
// answer is judged by the directory's kind (ChangePolling); this type only
// holds and compares.
import MediaStore

package struct ChangeToken: Sendable, Equatable {
    /// What the answer said of the directory, hashed: a collection's
    /// properties, a page's entries, an S3 page's keys. Equal digests:
    /// nothing a listing would show changed.
    package var digest: String
    /// An HTML page's `ETag` and `Last-Modified`, sent back as
    /// `If-None-Match` and `If-Modified-Since`; nil when it gave none.
    package var etag: String?
    package var lastModified: String?

    package init(digest: String, etag: String? = nil, lastModified: String? = nil) {
        self.digest = digest
        self.etag = etag
        self.lastModified = lastModified
    }

    /// A token over `parts`, each length-prefixed so that no two lists of
    /// parts hash alike by moving a boundary.
    package init(of parts: [String], etag: String? = nil, lastModified: String? = nil) {
        var text = ""
        for part in parts { text += "\(part.utf8.count):\(part)\n" }
        self.init(digest: SHA256.hex(text), etag: etag, lastModified: lastModified)
    }

    /// A validator as a header line may carry it back: printable ASCII, at
    /// most 256 bytes, else none (a hostile value is never sent).
    package static func validator(_ value: String?) -> String? {
        guard let value, !value.isEmpty, value.utf8.count <= 256,
              value.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7f }) else { return nil }
        return value
    }

    /// What a poll found.
    package enum Verdict: Sendable, Equatable {
        /// Nothing a listing would show changed; keep this token (it may
        /// carry validators the old one lacked).
        case unchanged(ChangeToken)
        /// Listed again; `seen` is what the poll saw, whose validators the
        /// listing's token takes when their digests agree (`adopting`).
        case changed(seen: ChangeToken?)
    }

    /// This token, with `other`'s validators when both say the same: a
    /// listing's token (which has none) after a poll that had them.
    package func adopting(validatorsOf other: ChangeToken?) -> ChangeToken {
        guard let other, other.digest == digest else { return self }
        return ChangeToken(digest: digest, etag: other.etag, lastModified: other.lastModified)
    }
}
