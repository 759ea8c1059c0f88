// Bytes counted by read class (MediaCache's ReadClass: 0 play, 1 scan,
// 2 background), one atomic a class: every reader and the network thread
// add to them.
import Synchronization

package final class ClassBytes: Sendable {
    package static let classes = 3
    private let play = Atomic<Int64>(0)
    private let scan = Atomic<Int64>(0)
    private let background = Atomic<Int64>(0)

    package init() {}

    package func add(_ count: Int64, byClass index: Int) {
        switch index {
        case 0: play.add(count, ordering: .relaxed)
        case 1: scan.add(count, ordering: .relaxed)
        default: background.add(count, ordering: .relaxed)
        }
    }

    /// By class index: play, scan, background.
    package var values: [Int64] {
        [play.load(ordering: .relaxed), scan.load(ordering: .relaxed), background.load(ordering: .relaxed)]
    }
}
