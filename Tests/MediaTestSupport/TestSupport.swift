// What several suites share: a seeded generator, a background runner, a
// value shared between test threads, and the
// one poll for a state nothing signals.
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import MediaNetwork
import MediaSupport

/// A tiny seeded generator so a failing random sequence replays exactly.
struct SplitMix64 {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }

    /// `count` bytes, eight from each draw, written in place: drawn a byte
    /// at a time through `map`, a 32 MiB file took most of a test's 30 s
    /// in the ThreadSanitizer build.
    mutating func bytes(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        bytes.withUnsafeMutableBytes { raw in
            var at = 0
            while at < count {
                let word = next()
                let n = min(8, count - at)
                withUnsafeBytes(of: word) { raw.baseAddress!.advanced(by: at).copyMemory(from: $0.baseAddress!, byteCount: n) }
                at += n
            }
        }
        return bytes
    }
}

/// The bytes `i * times + plus` (mod 256) for each `i` of `range`, written
/// in place: through `map`, each byte costs a closure call, and three 8 MiB
/// files made most of a test's minute under ThreadSanitizer.
func steppedBytes(_ range: Range<Int>, times: Int, plus: Int = 0) -> [UInt8] {
    [UInt8](unsafeUninitializedCapacity: range.count) { buffer, initialized in
        var value = range.lowerBound &* times &+ plus
        for at in 0..<range.count {
            buffer[at] = UInt8(truncatingIfNeeded: value)
            value &+= times
        }
        initialized = range.count
    }
}

/// Runs a closure on its own thread; `result` waits for it.
final class Background<T>: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private var outcome: Result<T, Error>?

    init(_ body: @escaping @Sendable () throws -> T) {
        Thread { [self] in
            outcome = Result { try body() }
            done.signal()
        }.start()
    }

    func result(timeout: Double = 20) throws -> T {
        guard done.wait(timeout: .now() + timeout) == .success else {
            throw MediaError(ETIMEDOUT, "background work did not finish within \(timeout) s")
        }
        return try outcome!.get()
    }
}

/// A flag shared between test threads.
final class SharedValue<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: T
    init(_ value: T) { stored = value }
    var value: T {
        get { lock.lock(); defer { lock.unlock() }; return stored }
        set { lock.lock(); stored = newValue; lock.unlock() }
    }
}

/// Looks at `predicate` until it holds; false if it still does not after
/// `timeout` (a bound against a hang only). For a state the code under test
/// tells no one of, and only there: a read that began to wait inside a
/// FileLoader, a Worker whose stop began, a thread the kernel has yet to take
/// out of /proc. What the code or a fake signals is waited for on its signal.
func eventually(timeout: Double = 10, _ predicate: () -> Bool) -> Bool {
    let deadline = Deadline.after(seconds: timeout, clock: .system)
    while !predicate() {
        if deadline.hasPassed { return false }
        // The one poll of the unit tests: nothing wakes a waiter when the state changes.
        usleep(1000)
    }
    return true
}
