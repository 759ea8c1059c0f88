// Where an SFTP read is: the head it announced (once, from the file's
// size and mtime) and the bytes it delivered of that length, so a read
// that goes on on a new session asks for the rest alone. Pure: unit tested.
//
// The head is told with the body's first bytes, not once the file is open:
// the loader measures the link's rate from its head (LinkEstimate), and
// the time from an open to the first bytes is a round trip, no rate.
import MediaSupport

struct SFTPReadProgress {
    let request: FetchRequest
    private(set) var head: ResponseHead?
    /// Whether the delegate has the head (`tell`).
    private(set) var told = false
    private(set) var mtime: Int64?
    /// Absolute offsets: where the next byte comes from, and the end.
    private(set) var offset: Int64
    private(set) var end: Int64 = 0

    init(request: FetchRequest) {
        self.request = request
        offset = request.range?.lowerBound ?? 0
    }

    /// The head for a file of `size` bytes modified at `mtime`: its range
    /// (or the whole file) cut at its end, as RemoteFileHead says it.
    @discardableResult
    mutating func begin(size: Int64?, mtime: Int64?, roundTrip: ResponseHead.RoundTrip = .unknown) -> ResponseHead {
        self.mtime = mtime
        let size = size ?? -1
        let start = request.range?.lowerBound ?? 0
        let upper = min(request.range?.upperBound ?? size, size)
        let length = size < 0 ? -1 : max(upper - start, 0)
        end = start + max(length, 0)
        var head = RemoteFileHead.head(for: request, length: length, mtime: mtime)
        head.roundTrip = roundTrip
        self.head = head
        return head
    }

    /// What is left to read; nil for a HEAD, or a file of unknown size.
    var remaining: Range<Int64>? {
        guard head != nil, request.method != .head, offset <= end else { return nil }
        return offset..<end
    }

    mutating func delivered(_ count: Int64) { offset += count }

    /// The head, the first time it is asked for once begun; then nil.
    mutating func tell() -> ResponseHead? {
        guard !told, let head else { return nil }
        told = true
        return head
    }
}
