// A kind of listed directory that can say whether it changed for less than
// a listing (`--poll-interval`, decision 0049). The kind owns how it asks:
// a WebDAV collection a PROPFIND of depth 0, an HTML index a conditional
// GET (else its entries' hash), an S3 prefix its listing's first page.
// Its listing gives the token it was listed at, from the same answer, so
// no change between a listing and the next poll goes unseen. The catalog
// owns when polls run (ChangePoller) and sends the request at the mount's
// lowest priority; a changed directory is listed again through the
// refresh path, listing doubt and all.
import MediaNetwork
import MediaSupport

package protocol ChangePolling: Listing {
    /// Its entries now, and the token of the answer they came from (nil:
    /// the answer gave nothing to compare; then each poll is a listing).
    func listWithToken(in context: ListingContext) throws -> (sources: [Source], token: ChangeToken?)
    /// The one request that asks whether it changed since `token`.
    func changeRequest(since token: ChangeToken?) -> FetchRequest
    /// What the answer to `changeRequest` says; throws a MediaError naming
    /// the directory for an answer that says nothing (an error status, a
    /// document that does not parse): the poll failed, nothing is listed.
    func verdict(on answer: TextFetch.Answer, since token: ChangeToken?) throws -> ChangeToken.Verdict
}

extension ChangePolling {
    /// A token that was nil, or differs: changed.
    package func compare(_ seen: ChangeToken?, with token: ChangeToken?) -> ChangeToken.Verdict {
        guard let seen, let token, seen.digest == token.digest else { return .changed(seen: seen) }
        return .unchanged(seen)
    }
}
