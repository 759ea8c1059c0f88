// How far a session's streaming reads ask ahead of the data: libssh2 keeps
// four times a read call's size asked for, so one SFTP channel carries
// at most that much a round trip. A fixed 1 MiB is 10 MB/s at 100 ms:
// the link's rate on a 50 Mbit/s one, a fifth of a 400 Mbit/s one (whose
// round trip holds 5 MB). Grown as TCP grows its window, by what a
// window of a sequential read achieved: a window whose bytes came at
// close to the whole ask-ahead a round trip was bound by it, so the next
// asks twice as far (up to libssh2's own cap); one that came at less was
// bound by the link, so the ask-ahead is two of the link's round trips
// (no less than the start): what a seek on this session then waits
// behind (the answers to what was asked ahead still cross the link) stays
// near a round trip of the link's bytes.
// A value on the session it paces: touched by its one user at a time.
import Foundation

struct SFTPReadAhead {
    /// Where a session starts, and the least it asks ahead.
    static let least = 1 << 20
    /// libssh2's own bound: four of its 2 MiB channel windows.
    static let most = 8 << 20
    /// A window's bytes a round trip above this share of the ask-ahead:
    /// bound by it, not by the link.
    static let boundShare = 0.75
    /// Bytes a window must have to be judged (less says little of a rate).
    static let judged: Int64 = 1 << 20

    private(set) var bytes = Self.least

    /// A streaming window of `count` bytes was read in `seconds`, on a
    /// link whose round trip is `roundTrip` seconds (nil: not known).
    mutating func windowRead(count: Int64, seconds: Double, roundTrip: Double?) {
        guard let roundTrip, roundTrip > 0, seconds > 0, count >= Self.judged else { return }
        let perRoundTrip = Double(count) / seconds * roundTrip
        if perRoundTrip >= Self.boundShare * Double(bytes) {
            bytes = min(bytes * 2, Self.most)
        } else {
            bytes = max(Self.least, min(bytes, Int(min(perRoundTrip * 2, Double(Self.most)))))
        }
    }
}
