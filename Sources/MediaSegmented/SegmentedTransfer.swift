// One request for a range of a VOD's file, answered from its parts: once the
// layout is known, the range's pieces are fetched one after another from
// the segments (a ranged GET each, through the mount's fetcher), their
// bodies streamed in order to the one delegate, under one response head
// made up here (206 with Content-Range, the VOD's ETag and type). So the
// loader sees a server that answers ranges of one file. A HEAD, a range
// past the end, or a request whose If-Range no longer matches is answered
// here without a segment request (the last with 200 and the whole file).
// An AES-128 segment's piece is asked for from the block before it and
// decrypted on the way (PieceDecryptor).
//
// Threads: `start` runs on the caller's; the pieces' callbacks on the
// fetcher's thread, one at a time; answers made up without a request go
// through the SegmentedFetcher's worker, never from inside `start` (the
// caller may hold its own lock around it). `cancel` may come from any
// thread: `control` says whether the transfer is stopped and which piece
// request is current, so a cancel that races the start of the next piece
// still stops it.
//
// Held (an archive member's long transfer, `FetchRequest.allowance`): the
// allowance counts the whole transfer's body; the current piece is asked
// for with what is left of it, `allow` passes a raise on to that piece, and
// a piece that would start past the allowance waits for the raise that
// reaches it (started then from `allow`'s thread: no piece is running).
import MediaNetwork
import MediaSupport
#if canImport(Glibc)
import Glibc
import Foundation
#endif
import MediaStore
import MediaSources

final class SegmentedTransfer: TransferDelegate, @unchecked Sendable {
    let id: TransferID
    private let request: FetchRequest
    private let delegate: TransferDelegate
    private let sizer: SegmentSizer
    private let fetcher: Fetching
    private let answerLater: @Sendable (@escaping @Sendable () -> Void) -> Void
    private let finished: @Sendable (TransferID) -> Void

    private struct Control {
        var stopped = false
        var current: TransferID?
        var priority: FetchRequest.Priority
        /// Body bytes the whole transfer may deliver (nil: all).
        var allowance: Int64?
        /// Body bytes of the pieces before the current one.
        var pieceStart: Int64 = 0
        /// The next piece waits for an allowance past `pieceStart`.
        var waiting = false
    }
    private let control: Locked<Control>

    /// Touched only on the fetcher's thread, one piece at a time.
    private var pieces: [SegmentedVOD.Layout.Piece] = []
    private var next = 0
    /// The current piece's request, bytes due and how it ended.
    private var inFlight = PieceInFlight()
    private var headSent = false
    private var delegateStopped = false

    init(id: TransferID, request: FetchRequest, delegate: TransferDelegate, sizer: SegmentSizer, fetcher: Fetching,
         answerLater: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void,
         finished: @escaping @Sendable (TransferID) -> Void) {
        self.id = id
        self.request = request
        self.delegate = delegate
        self.sizer = sizer
        self.fetcher = fetcher
        self.answerLater = answerLater
        self.finished = finished
        control = Locked(Control(priority: request.priority, allowance: request.allowance))
    }

    private var vod: SegmentedVOD { sizer.vod }

    func start() {
        // A GET is a read waiting: its sizing keeps the heads it takes next.
        sizer.whenSized(priority: request.priority, forRead: request.method == .get) { [self] result in
            switch result {
            case .failure(let error):
                answerLater { [self] in end(head: nil, error: error) }
            case .success(let layout):
                begin(layout)
            }
        }
    }

    private func begin(_ layout: SegmentedVOD.Layout) {
        self.layout = layout
        let length = layout.length
        var headers = ["content-type": vod.contentType, "etag": layout.etag, "accept-ranges": "bytes"]
        if let lastModified = vod.lastModified { headers["last-modified"] = lastModified }
        if request.method != .get {
            headers["content-length"] = String(length)
            let head = ResponseHead(status: 200, headers: headers)
            return answerLater { [self] in end(head: head, error: nil) }
        }
        var range = request.range ?? 0..<length
        var status = request.range == nil ? 200 : 206
        if let ifRange = request.ifRange, ifRange != layout.etag {
            // Another version: the whole of this one, as a server does.
            (range, status) = (0..<length, 200)
        }
        if status == 206, range.lowerBound >= length {
            headers["content-range"] = "bytes */\(length)"
            let head = ResponseHead(status: 416, headers: headers)
            return answerLater { [self] in end(head: head, error: nil) }
        }
        range = range.clamped(to: 0..<length)
        if status == 206 {
            headers["content-range"] = "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(length)"
        }
        headers["content-length"] = String(range.count)
        pieces = layout.pieces(of: range)
        // Cipher text without its key is never served as the file's bytes.
        if let missing = vod.missingKey(among: pieces) { return answerLater { [self] in end(head: nil, error: missing) } }
        let head = ResponseHead(status: status, headers: headers)
        guard !pieces.isEmpty else { return answerLater { [self] in end(head: head, error: nil) } }
        pendingHead = head
        startNextPiece()
    }

    /// The head to send before the first piece's body, once that piece answered.
    private var pendingHead: ResponseHead?
    /// Set by `begin`, before the first piece.
    private var layout: SegmentedVOD.Layout?

    private func startNextPiece() {
        let piece = pieces[next]
        // Held: the piece is asked for with what is left of the allowance,
        // or waits for more.
        let (priority, pieceAllowance, go) = control.withLock { control -> (FetchRequest.Priority, Int64?, Bool) in
            guard let allowance = control.allowance, vod.parts[piece.part].encryption == nil else { return (control.priority, nil, true) }
            let left = allowance - control.pieceStart
            if left <= 0 {
                control.waiting = true
                return (control.priority, nil, false)
            }
            return (control.priority, left < Int64(piece.range.count) ? left : nil, true)
        }
        guard go else { return }
        next += 1
        if pieceAllowance == nil, let kept = keptHead(of: piece) {
            return answerLater { [self] in serve(kept, of: piece) }
        }
        var (request, decryptor) = vod.request(part: piece.part, piece.range, priority: priority, group: self.request.group)
        request.allowance = pieceAllowance
        inFlight.begin(asked: request.range!, due: Int64(piece.range.count), decryptor: decryptor)
        let id = fetcher.start(request, delegate: self)
        let stopped = control.withLock { control in
            control.current = id
            return control.stopped
        }
        if stopped { fetcher.cancel(id) }
    }

    /// The head a sizing kept of `piece`'s part (decision 0062): a whole
    /// resource in the clear, on a transfer that is not held.
    private func keptHead(of piece: SegmentedVOD.Layout.Piece) -> [UInt8]? {
        let part = vod.parts[piece.part]
        guard let heads = sizer.heads, let layout, part.range == nil, part.encryption == nil,
              control.withLock({ $0.allowance == nil }) else { return nil }
        return heads.take(url: part.url, length: partLength(piece.part, in: layout), from: piece.range.lowerBound,
                          count: Int64(piece.range.count))
    }

    private func partLength(_ part: Int, in layout: SegmentedVOD.Layout) -> Int64 {
        layout.offsets[part + 1] - layout.offsets[part]
    }

    /// Hands the delegate `piece`'s first bytes from a kept head, then asks
    /// its segment for the rest of it, if any. On the answers' worker, in
    /// the pieces' order as their callbacks are.
    private func serve(_ kept: [UInt8], of piece: SegmentedVOD.Layout.Piece) {
        if control.withLock({ $0.stopped }) {
            // Stopped before they went out: kept for the next read there.
            if let layout {
                sizer.heads?.giveBack(url: vod.parts[piece.part].url, length: partLength(piece.part, in: layout),
                                      bytes: kept, from: piece.range.lowerBound)
            }
            return end(head: nil, error: MediaError(ECANCELED, "cancelled"))
        }
        if var pending = pendingHead {
            pendingHead = nil
            headSent = true
            // Answered from memory: its time is no round trip of the link
            // (taken for one, the link looked near and reads lost their
            // link-sized windows).
            pending.roundTrip = .unknown
            guard delegate.transfer(id, receiveHead: pending) else { return end(head: nil, error: MediaError(ECANCELED, "cancelled")) }
        }
        let count = kept.count
        let more = kept.withUnsafeBytes { delegate.transfer(id, receiveBody: $0) }
        guard more else { return end(head: nil, error: MediaError(ECANCELED, "cancelled")) }
        control.withLock { $0.pieceStart += Int64(count) }
        if count < piece.range.count {
            next -= 1
            pieces[next].range = (piece.range.lowerBound + Int64(count))..<piece.range.upperBound
            return startNextPiece()
        }
        if next < pieces.count { return startNextPiece() }
        end(head: nil, error: nil)
    }

    /// Stops the transfer from any thread; the delegate hears `complete`
    /// with a cancellation from the current piece's end.
    func cancel() {
        let (current, waited) = control.withLock { control -> (TransferID?, Bool) in
            control.stopped = true
            defer { control.waiting = false }
            return (control.current, control.waiting)
        }
        // A piece waiting for its allowance has no request to hear it from.
        if waited { return answerLater { [self] in end(head: nil, error: MediaError(ECANCELED, "cancelled")) } }
        if let current { fetcher.cancel(current) }
    }

    func promote() {
        let current = control.withLock { control -> TransferID? in
            control.priority = .read
            return control.current
        }
        if let current { fetcher.promote(current) }
    }

    // MARK: the current piece's callbacks (fetcher's thread)

    func transfer(_ id: TransferID, receiveHead head: ResponseHead) -> Bool {
        let piece = pieces[next - 1]
        // 206 for exactly the bytes asked; a 200 is usable only when they
        // start the resource (a server that ignores Range): the rest is cut.
        let usable = head.status == 206 ? head.contentRange?.range.lowerBound == inFlight.asked.lowerBound
            && (head.contentRange?.range.count ?? 0) >= inFlight.asked.count
            : head.status == 200 && inFlight.asked.lowerBound == 0
        if usable, let resource = vod.parts[piece.part].resource, !Self.answer(head, isOf: resource) {
            // The offsets were read from another version (an archive's
            // volume changed): its bytes here would be neither.
            inFlight.failure = MediaError.io("segment \(piece.part + 1) changed since its offsets were read "
                                    + "(length \(resource.length), ETag \(resource.etag ?? "none"))")
            return false
        }
        guard usable else {
            inFlight.failure = head.status == 206 || head.status == 200
                ? MediaError.io("segment \(piece.part + 1) answered \(head.headers["content-range"] ?? "no Content-Range") "
                                + "to bytes \(inFlight.asked.lowerBound)-\(inFlight.asked.upperBound - 1) (it changed?)")
                : MediaError(head.failure.errno, "segment \(piece.part + 1): HTTP \(head.status)")
            if !headSent, head.status >= 400 {
                // The loader maps the status as it would a file's.
                inFlight.failureHead = ResponseHead(status: head.status, headers: [:])
            }
            return false
        }
        guard let pending = pendingHead else { return true }
        pendingHead = nil
        headSent = true
        if !delegate.transfer(self.id, receiveHead: pending) {
            delegateStopped = true
            return false
        }
        return true
    }

    /// Whether an answer is of the resource version a part's offsets were
    /// read from: its whole length and validators where it says them
    /// (ETags compared weakly: Apache's turns strong a second after a change).
    static func answer(_ head: ResponseHead, isOf resource: HLSPlaylist.Part.Resource) -> Bool {
        let total = head.status == 206 ? head.contentRange?.total : head.contentLength
        if let total, total != resource.length { return false }
        func opaque(_ etag: String) -> Substring { etag.hasPrefix("W/") ? etag.dropFirst(2) : Substring(etag) }
        if let etag = head.etag, let known = resource.etag { return opaque(etag) == opaque(known) }
        if let date = head.lastModified, let known = resource.lastModified { return date == known }
        return true
    }

    func transfer(_ id: TransferID, receiveBody bytes: UnsafeRawBufferPointer) -> Bool {
        guard inFlight.due > 0 else { inFlight.pieceDone = true; return false }
        guard let decryptor = inFlight.decryptor else { return forward(bytes) }
        guard let plain = decryptor.feed(bytes) else {
            inFlight.failure = MediaError.io("segment \(pieces[next - 1].part + 1): AES-128 decryption failed")
            return false
        }
        return plain.withUnsafeBytes { forward($0) }
    }

    /// Hands the delegate what is due of `bytes`; false to stop the piece.
    private func forward(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard !bytes.isEmpty else { return true }
        let count = Int(min(Int64(bytes.count), inFlight.due))
        inFlight.due -= Int64(count)
        if !delegate.transfer(self.id, receiveBody: UnsafeRawBufferPointer(rebasing: bytes[..<count])) {
            delegateStopped = true
            return false
        }
        if inFlight.due == 0, count < bytes.count { inFlight.pieceDone = true; return false }
        return true
    }

    func transfer(_ id: TransferID, completeWith error: MediaError?) {
        if let failure = inFlight.failure {
            return end(head: inFlight.failureHead, error: failure)
        }
        if delegateStopped { return end(head: nil, error: error ?? MediaError(ECANCELED, "cancelled")) }
        let stopped = control.withLock { $0.stopped }
        if stopped { return end(head: nil, error: MediaError(ECANCELED, "cancelled")) }
        if let error, !inFlight.pieceDone { return end(head: nil, error: error) }
        if inFlight.due > 0 {
            let piece = pieces[next - 1]
            return end(head: nil, error: MediaError.io("segment \(piece.part + 1) ended \(inFlight.due) bytes short"))
        }
        if next < pieces.count {
            let done = Int64(pieces[next - 1].range.count)
            control.withLock { $0.pieceStart += done }
            return startNextPiece()
        }
        end(head: nil, error: nil)
    }

    /// The transfer may deliver `bytes` in all: the current piece is let
    /// go on, or the next one started if it waited for this.
    func allow(through bytes: Int64) {
        let (current, through, start) = control.withLock { control -> (TransferID?, Int64, Bool) in
            guard !control.stopped, let allowance = control.allowance, bytes > allowance else { return (nil, 0, false) }
            control.allowance = bytes
            if control.waiting, bytes > control.pieceStart {
                control.waiting = false
                return (nil, 0, true)
            }
            return (control.current, bytes - control.pieceStart, false)
        }
        if start {
            startNextPiece()
        } else if let current, through > 0 {
            fetcher.allow(current, through: through)
        }
    }

    /// Tells the delegate the transfer is over: a head first when none was
    /// sent and there is one to send.
    private func end(head: ResponseHead?, error: MediaError?) {
        var error = error
        var head = head
        if error == nil, control.withLock({ $0.stopped }) {
            // Cancelled before a made-up answer went out: a cancel, as promised.
            (head, error) = (nil, MediaError(ECANCELED, "cancelled"))
        }
        if !headSent, let head {
            headSent = true
            _ = delegate.transfer(id, receiveHead: head)
        }
        finished(id)
        delegate.transfer(id, completeWith: error)
    }
}
