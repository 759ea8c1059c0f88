// The seam between the cache and the network: a request goes in, the
// response head, the body bytes and the end come back to a delegate, in that
// order, on the fetcher's own thread. Core tests replace it with a fake that
// counts requests; the mount uses CurlFetcher, under SFTPFetcher (sftp://
// reads) and SegmentedFetcher (VODs' parts).
import MediaSupport
#if canImport(Glibc)
import Glibc
#endif

public typealias TransferID = UInt64

public struct FetchRequest: Sendable {
    /// PROPFIND lists a WebDAV collection, MLSD an FTP directory (a
    /// listing's requests, never a file's).
    /// `list`: an FTP directory's LIST, read by libcurl's own parser (a
    /// wildcard transfer whose every file is skipped): what a server
    /// without MLSD answers.
    package enum Method: String, Sendable {
        case get = "GET", head = "HEAD", propfind = "PROPFIND", mlsd = "MLSD", list = "LIST"
    }

    /// Who waits on the bytes: a reader now (or a stat), a listing's
    /// background probes, a reader soon, a library scan's reader now
    /// (behind playback and its readahead), or nobody yet.
    public enum Priority: Int, Sendable, Comparable, CaseIterable {
        /// `background`: a job no one watches (ReadClass.background): after
        /// scans and preload for a place, paused while a read runs.
        case read = 0, probe, readahead, scan, preload, background
        public static func < (a: Priority, b: Priority) -> Bool { a.rawValue < b.rawValue }
    }

    package var url: String
    package var method: Method
    /// Half-open byte range to ask for; nil asks for the whole body. One
    /// that ends at `toTheEnd` asks for the rest of a file whose length is
    /// not known yet (`bytes=N-`).
    package var range: Range<Int64>?
    package static let toTheEnd = Int64.max
    /// Sent as If-Range so a changed resource answers 200, never stale 206.
    package var ifRange: String?
    package var priority: Priority
    /// Who asks: the fetcher shares an origin's connections fairly among
    /// groups (one file's reads do not queue behind another file's). The
    /// file's URL unless said otherwise.
    package var group: String
    /// Header lines of the request itself (a PROPFIND's `Depth`), sent on
    /// every hop, besides those HTTPOptions gives the origin.
    package var headers: [String]
    /// A request body (a PROPFIND's), sent on every hop.
    package var body: [UInt8]?
    /// Body bytes the transfer may deliver before it holds (nil: all). A
    /// long transfer asks for the rest of a file once and is let go on as
    /// its reader advances (`Fetching.allow`), so a sequential reader makes
    /// one request, not one per window; see `Fetching.holdsTransfers(of:)`.
    package var allowance: Int64?

    package init(url: String, method: Method = .get, range: Range<Int64>? = nil, ifRange: String? = nil,
                priority: Priority = .read, group: String? = nil, headers: [String] = [], body: [UInt8]? = nil) {
        self.url = url
        self.method = method
        self.range = range
        self.ifRange = ifRange
        self.priority = priority
        self.group = group ?? url
        self.headers = headers
        self.body = body
    }
}

/// Callbacks of one transfer. Returning false from either `receive` stops
/// the transfer; `complete` is then called with a cancellation error.
public protocol TransferDelegate: AnyObject, Sendable {
    func transfer(_ id: TransferID, receiveHead head: ResponseHead) -> Bool
    func transfer(_ id: TransferID, receiveBody bytes: UnsafeRawBufferPointer) -> Bool
    func transfer(_ id: TransferID, completeWith error: MediaError?)
}

public protocol Fetching: AnyObject, Sendable {
    /// Starts a transfer; the delegate is called on the fetcher's thread.
    @discardableResult
    func start(_ request: FetchRequest, delegate: TransferDelegate) -> TransferID
    /// Stops a transfer; its delegate gets `complete` with a cancellation.
    func cancel(_ id: TransferID)
    /// A reader now waits on a background transfer: run it as a read.
    func promote(_ id: TransferID)
    /// A reader of `priority` now waits on the transfer: run it at that
    /// priority if it is more urgent than its own.
    func promote(_ id: TransferID, to priority: FetchRequest.Priority)
    /// The transfer may deliver `bytes` body bytes in all (more than it
    /// was allowed before); it holds once it has delivered them.
    func allow(_ id: TransferID, through bytes: Int64)
    /// Whether `FetchRequest.allowance` and `allow` are honoured for
    /// transfers of `url`. A held transfer that a read (or a player's
    /// readahead) waits behind for a place, or that is held for long, ends
    /// with `FetchError.yielded`: what it delivered stands, and the next
    /// read asks again.
    func holdsTransfers(of url: String) -> Bool
    /// Where the file at `url` is made of other resources (a segmented
    /// VOD's parts), once their lengths are known: the offsets at which its
    /// parts begin, ascending, the first 0, then the file's length. Nil for
    /// a file of one resource. A request crossing a part's start is served
    /// as requests one after another, each a round trip; asked for part by
    /// part, they run at once.
    func partOffsets(of url: String) -> [Int64]?
    /// Ends every transfer (their delegates hear of it) and stops.
    func shutdown()
    /// Where the mount's counters are kept, for those that time requests.
    var statistics: Statistics? { get }
}

/// How a held transfer ends when it gives up its connection: not a
/// failure of the server's.
package enum FetchError {
    package static let yielded = EAGAIN
}

extension Fetching {
    package var statistics: Statistics? { nil }
    package func holdsTransfers(of url: String) -> Bool { false }
    package func partOffsets(of url: String) -> [Int64]? { nil }
    package func allow(_ id: TransferID, through bytes: Int64) {}

    /// A fetcher without priorities between read and background runs a
    /// promoted transfer as a read only when a read waits on it.
    package func promote(_ id: TransferID, to priority: FetchRequest.Priority) {
        if priority == .read { promote(id) }
    }
}
