import Foundation
import MediaNetwork
import MediaSupport

/// The system's clocks, which a test moves forward (`advance`) to make a
/// cache time or a backoff pass without waiting for it.
final class TestClock: @unchecked Sendable {
    private let offset = Locked(0.0)

    var clock: Clock {
        let offset = self.offset
        return Clock(monotonic: { Clock.system.monotonic() + offset.withLock { $0 } },
                     wall: { Clock.system.wall() + offset.withLock { $0 } })
    }

    func advance(_ seconds: Double) {
        offset.withLock { $0 += seconds }
    }
}
