// What the link to one origin is like, learned from this process's own
// transfers: the shortest time to a response head (a round trip) and the
// best body rate seen lately. Their product, the bandwidth-delay product,
// is how many bytes a fetch must ask for to keep the link busy for one round
// trip. Bounded: at most `maxOrigins` origins, at most `maxBytes` per fetch.
import Foundation
import MediaSupport

public final class LinkEstimate: Sendable {
    /// Shared by every loader of the process: the link belongs to the origin, not to a file.
    package static let shared = LinkEstimate()

    package static let maxOrigins = 256
    /// No fetch sized by the link asks for more than this.
    package static let maxBytes: Int64 = 8 << 20
    /// Below this round trip (loopback, a LAN) the kernel's own readahead
    /// hides the wait; fetching more would only fetch bytes nobody reads.
    /// Well above loopback's, so a loaded machine's local server, slower to
    /// answer, stays under it (decision 0016).
    package static let minRoundTrip = 0.010
    /// Bodies shorter than this end too soon to tell the rate.
    package static let minRateSample: Int64 = 128 << 10
    /// Samples kept per origin: a route or load that changed is forgotten within these.
    package static let samples = 16

    package struct Link: Sendable {
        var roundTrips: [Double] = []
        var rates: [Double] = []
        var lastUsed = 0
    }

    private let links = Locked<(byOrigin: [HTTPOrigin: Link], clock: Int)>(([:], 0), rank: .linkEstimate)

    package init() {}

    /// A response head came `seconds` after its request was sent.
    package func roundTrip(_ seconds: Double, to url: String) {
        guard seconds.isFinite, seconds > 0, let origin = HTTPOrigin(url: url) else { return }
        update(origin) { Self.keep(seconds, in: &$0.roundTrips) }
    }

    /// A body of `bytes` took `seconds` from its head to its end.
    package func body(_ bytes: Int64, took seconds: Double, from url: String) {
        guard bytes >= Self.minRateSample, seconds.isFinite, seconds > 0, let origin = HTTPOrigin(url: url) else { return }
        update(origin) { Self.keep(Double(bytes) / seconds, in: &$0.rates) }
    }

    /// Bytes in flight over one round trip to `url`'s origin, 0 while unknown.
    package func bytesPerRoundTrip(to url: String) -> Int64 {
        guard let origin = HTTPOrigin(url: url) else { return 0 }
        return links.withLock { state in
            guard let link = state.byOrigin[origin], let rtt = link.roundTrips.min(),
                  rtt >= Self.minRoundTrip, let rate = link.rates.max() else { return 0 }
            let bytes = rtt * rate
            return bytes >= Double(Self.maxBytes) ? Self.maxBytes : Int64(bytes)
        }
    }

    /// Whether the link to `url`'s origin is known to be far: its shortest
    /// round trip `minRoundTrip` or more (one response head is enough).
    package func isFar(to url: String) -> Bool {
        guard let origin = HTTPOrigin(url: url) else { return false }
        return links.withLock { $0.byOrigin[origin]?.roundTrips.min().map { $0 >= Self.minRoundTrip } ?? false }
    }

    private func update(_ origin: HTTPOrigin, _ change: (inout Link) -> Void) {
        links.withLock { state in
            state.clock += 1
            if state.byOrigin[origin] == nil, state.byOrigin.count >= Self.maxOrigins,
               let oldest = state.byOrigin.min(by: { $0.value.lastUsed < $1.value.lastUsed })?.key {
                state.byOrigin[oldest] = nil
            }
            var link = state.byOrigin[origin] ?? Link()
            link.lastUsed = state.clock
            change(&link)
            state.byOrigin[origin] = link
        }
    }

    private static func keep(_ sample: Double, in list: inout [Double]) {
        list.append(sample)
        if list.count > samples { list.removeFirst(list.count - samples) }
    }
}
