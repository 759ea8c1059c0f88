// Whether a CurlTransfer may hand over body bytes now, and whether libcurl
// has it paused: it yields to reads (a preload while reads run), waits for
// the bandwidth limit, or holds once it delivered its allowance, until its
// reader asks for more. Owned by the network thread, as its transfer is.
import MediaSupport

struct TransferPause {
    /// Paused so that reads go first (a preload while reads run).
    var yielding = false
    /// Paused by the write callback: the bandwidth limit refused a piece.
    var throttled = false
    /// Body bytes it may deliver (`FetchRequest.allowance`, raised by
    /// `allow`), and those it delivered: once they meet, it holds.
    var allowance: Int64
    private(set) var received: Int64 = 0
    /// When it began to hold for its allowance (nil: it does not).
    private(set) var heldSince: Double?
    /// Whether libcurl has the transfer paused now.
    private(set) var curlPaused = false
    /// The fetcher's clock: when a hold begins is read from it.
    private let clock: Clock

    init(allowance: Int64, clock: Clock) {
        self.allowance = allowance
        self.clock = clock
    }

    /// A new hop (a redirect's target): nothing paused, nothing received.
    mutating func newHop() {
        yielding = false
        throttled = false
        heldSince = nil
        received = 0
        curlPaused = false
    }

    mutating func delivered(_ count: Int) { received += Int64(count) }

    /// Whether libcurl should have it paused, when that differs from what
    /// it has (then taken as done); nil: no change. Yielding waits for the
    /// body: a transfer paused while its headers arrive can, once resumed,
    /// hand over the status line again and not the headers after it (seen
    /// as 206 answers without Content-Range).
    /// `inLibcurl`: it has a handle to pause (else nothing changes but the hold).
    mutating func change(headDelivered: Bool, inLibcurl: Bool) -> Bool? {
        if heldSince != nil && received < allowance { heldSince = nil }
        let pause = (yielding && headDelivered) || throttled || heldSince != nil
        guard pause != curlPaused, inLibcurl else { return nil }
        curlPaused = pause
        return pause
    }

    /// Whether it delivered all it may (it begins to hold then); libcurl
    /// then keeps the bytes, paused. Only the file's body counts.
    mutating func mustHold(headDelivered: Bool) -> Bool {
        guard received >= allowance, headDelivered else { return false }
        if heldSince == nil { heldSince = clock.monotonic() }
        curlPaused = true
        return true
    }

    /// The bandwidth limit refused a piece: libcurl keeps it, paused.
    mutating func throttle() {
        throttled = true
        curlPaused = true
    }
}
