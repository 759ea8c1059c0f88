// A kind of source: what turns a place media lives (an HTTP index page, a
// list file, a playlist, a WebDAV collection, an S3 prefix) into names and URLs.
// Every kind implements this one interface, so the catalog lists, refreshes
// and fails them all the same way and a new kind is one more file here.
//
// What it lists: `Source`s, each a file (with what the listing already knows
// of it: a listing that carries sizes and validators needs no probe) or a
// directory (carrying the Listing that lists it). Names are as the source
// says them; the catalog makes them safe and unique.
//
// How it refreshes: a directory of the mount is listed on its first lookup
// (from the listing saved in the cache, when there is one: a remount lists
// with no request, and the listing is refreshed at once in the background)
// and, when `refreshes`, again in the background once `--dir-cache-time` has
// passed or `user.mediafs.refresh` asks. A SOURCE argument's listing (a list
// file, a playlist) is read once, at mount, into the mount root; one over
// http from the copy saved when it was last fetched (SavedPresentations),
// and again in the background (ListingService+ReadAgain).
//
// How it fails: by throwing a MediaError that names the origin and what
// went wrong (its errno is what a lookup answers). A directory then keeps
// serving its last listing and is tried again after `ListingService.listingRetry`;
// a SOURCE argument stops the mount before anything is mounted.
//
// It must not touch the catalog or the cache: it is called without locks,
// on a lookup's thread or the listings worker, and only lists.
import Foundation
import MediaSupport
import MediaStore
import MediaNetwork
public protocol Listing: Sendable {
    /// Where it lists from, credentials removed, for logs and errors.
    var origin: String { get }
    /// Whether a directory it lists is listed again after the directory
    /// cache time.
    var refreshes: Bool { get }
    /// Its entries now, in the source's order.
    func list(in context: ListingContext) throws -> [Source]
    /// The Listing of a subdirectory it listed, made again from its URL
    /// (a saved listing keeps URLs, not Listings). By default, the kind
    /// the URL names on its own (`Source.at`).
    func subdirectory(at url: String) -> any Listing
}

extension Listing {
    package func subdirectory(at url: String) -> any Listing {
        Source.at(url: url).listing ?? HTMLIndex(url: url)
    }
}

/// A kind whose directory is one URL, listed again after the directory
/// cache time, whose subdirectories are of the same kind at their URLs
/// (an HTML index, a WebDAV collection).
package protocol URLListing: Listing {
    /// The directory's URL, ending in `/`; `user:pass@` kept.
    var url: String { get }
    init(url: String)
}

extension URLListing {
    package var origin: String { MediaError.redacted(url) }
    package var refreshes: Bool { true }

    package func subdirectory(at url: String) -> any Listing {
        Self(url: url)
    }
}

/// What a listing may use to reach its source: the mount's HTTP options
/// (credentials, headers, redirects) and its timeout.
public struct ListingContext: Sendable {
    package var http: HTTPOptions
    /// Seconds one listing may take, all requests together.
    package var timeout: Int
    /// The mount's clock: a listing's time limit is on it.
    package var clock: Clock
    /// One GET of a small text document; `TextFetch.get` unless a test
    /// gives another.
    package var fetchText: @Sendable (String) throws -> String
    /// One request of another method (a PROPFIND), answered whatever its
    /// status; `TextFetch.fetch` with `maxBytes` unless a test gives another.
    package var fetch: @Sendable (_ request: FetchRequest, _ maxBytes: Int) throws -> TextFetch.Answer
    /// Which variant of an HLS master playlist becomes its file.
    package var hlsVariant: HLSListing.VariantChoice = .highest
    /// Whether a VOD read from its saved documents goes on without a key
    /// that cannot be fetched (its encrypted parts then fail with EIO)
    /// rather than failing whole: keys are never saved.
    package var keysMayFail = false

    package init(clock: Clock, http: HTTPOptions = HTTPOptions(), timeout: Int = 30,
                fetchText: (@Sendable (String) throws -> String)? = nil,
                fetch: (@Sendable (FetchRequest, Int) throws -> TextFetch.Answer)? = nil) {
        self.http = http
        self.timeout = timeout
        self.clock = clock
        self.fetchText = fetchText ?? { url in try TextFetch.get(url, options: http, clock: clock, timeout: timeout) }
        self.fetch = fetch ?? { request, maxBytes in
            try TextFetch.fetch(request, options: http, clock: clock, timeout: timeout, maxBytes: maxBytes)
        }
    }
}
