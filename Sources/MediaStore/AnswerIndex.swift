// The answers journal's index: a 64-bit hash of each URL to the packed
// place of its last answer, in one flat table with linear probing, filled
// up to 7/8 where Swift's Dictionary keeps at most 3/4 of its buckets full:
// half the memory (decision 0009). Hash 0 marks an empty slot, so it is
// stored as 1: the journal checks the URL of what it reads, so two URLs on
// one key only cost one of them a probe.
import MediaSupport
package struct AnswerIndex: Sendable {
    /// Pairs of key and value; a key of 0 is an empty slot.
    private var slots: [UInt64] = []
    private(set) var count = 0
    private var capacity: Int { slots.count / 2 }

    package subscript(hash: UInt64) -> UInt64? {
        get {
            guard capacity > 0 else { return nil }
            let key = Self.key(hash)
            var slot = home(key)
            while slots[2 * slot] != 0 {
                if slots[2 * slot] == key { return slots[2 * slot + 1] }
                slot = (slot + 1) & (capacity - 1)
            }
            return nil
        }
        set {
            guard let value = newValue else { return remove(hash) }
            if (count + 1) * 8 > capacity * 7 { grow() }
            let key = Self.key(hash)
            var slot = home(key)
            while slots[2 * slot] != 0 && slots[2 * slot] != key { slot = (slot + 1) & (capacity - 1) }
            if slots[2 * slot] == 0 { count += 1 }
            slots[2 * slot] = key
            slots[2 * slot + 1] = value
        }
    }

    /// Every (key, value), in no order.
    package var pairs: [(key: UInt64, value: UInt64)] {
        stride(from: 0, to: slots.count, by: 2).compactMap { slots[$0] == 0 ? nil : (slots[$0], slots[$0 + 1]) }
    }

    /// Rebuilds the table without `hash`: linear in the table, for the
    /// offline `cache clear URL` only.
    private mutating func remove(_ hash: UInt64) {
        guard self[hash] != nil else { return }
        let key = Self.key(hash)
        let kept = pairs.filter { $0.key != key }
        self = AnswerIndex()
        for pair in kept { self[pair.key] = pair.value }
    }

    private mutating func grow() {
        let old = slots
        slots = [UInt64](repeating: 0, count: 2 * max(1_024, 2 * capacity))
        count = 0
        for slot in stride(from: 0, to: old.count, by: 2) where old[slot] != 0 { self[old[slot]] = old[slot + 1] }
    }

    private func home(_ key: UInt64) -> Int {
        // Fibonacci hashing: the high bits of the product, as many as the table needs.
        Int(truncatingIfNeeded: (key &* 0x9E37_79B9_7F4A_7C15) >> UInt64(64 - capacity.trailingZeroBitCount))
    }

    private static func key(_ hash: UInt64) -> UInt64 { hash == 0 ? 1 : hash }
}
