// A first-in first-out queue with O(1) amortized append and pop: an array
// and the index of its head, compacted once the consumed part is most of it.
// Queues that skip dead entries lazily drop them in bulk with `removeAll(where:)`.

package struct FIFO<Element> {
    private var items: [Element] = []
    private var head = 0

    package init() {}

    /// Entries not yet popped, dead ones included.
    package var count: Int { items.count - head }
    package var isEmpty: Bool { head == items.count }

    /// The entry `popFirst` would return, left in place.
    package var first: Element? { head < items.count ? items[head] : nil }

    package mutating func append(_ element: Element) {
        items.append(element)
    }

    package mutating func popFirst() -> Element? {
        guard head < items.count else { return nil }
        let element = items[head]
        head += 1
        if head == items.count {
            items.removeAll()
            head = 0
        } else if head > 1024 && head * 2 > items.count {
            items.removeFirst(head)
            head = 0
        }
        return element
    }

    /// Keeps the order of what stays; O(count).
    package mutating func removeAll(where dead: (Element) -> Bool) {
        items.removeFirst(head)
        head = 0
        items.removeAll(where: dead)
    }
}

extension FIFO: Sendable where Element: Sendable {}
