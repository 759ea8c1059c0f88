// The piece of a segmented transfer being fetched now: the resource range
// asked for, the plain bytes still due from it, its AES-128 decryptor, and
// how it ended (all its bytes sent and stopped by us, or why its answer was
// unusable). Touched only on the fetcher's thread, as its transfer's pieces.
import Foundation
import MediaSupport
import MediaStore
import MediaNetwork
import MediaSources
struct PieceInFlight {
    /// The piece's resource range asked for (from the block before it, for a cipher text).
    private(set) var asked: Range<Int64> = 0..<0
    /// Plain bytes still due from it.
    var due: Int64 = 0
    private(set) var decryptor: PieceDecryptor?
    /// It sent all its bytes and was stopped by us, not by the delegate or a cancel.
    var pieceDone = false
    /// Why it failed, when its answer was unusable; the head to end with
    /// (the loader maps an HTTP error status as it would a file's).
    var failure: MediaError?
    var failureHead: ResponseHead?

    /// The next piece is asked for: its range, its plain length, its decryptor.
    mutating func begin(asked: Range<Int64>, due: Int64, decryptor: PieceDecryptor?) {
        self.asked = asked
        self.due = due
        self.decryptor = decryptor
        pieceDone = false
    }
}
