// Bytes counted by read class (MediaCache's ReadClass: 0 play, 1 scan),
// one atomic a class: every reader and the network thread add to them.
import Synchronization

package final class ClassBytes: Sendable {
    private let play = Atomic<Int64>(0)
    private let scan = Atomic<Int64>(0)

    package init() {}

    package func add(_ count: Int64, byClass index: Int) {
        if index == 0 { play.add(count, ordering: .relaxed) } else { scan.add(count, ordering: .relaxed) }
    }

    /// By class index: play, then scan.
    package var values: [Int64] { [play.load(ordering: .relaxed), scan.load(ordering: .relaxed)] }
}
