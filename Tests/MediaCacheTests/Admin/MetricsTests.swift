// The metrics address parser and the histogram, without a mount.
import XCTest
@testable import MediaCache
@testable import MediaSources
@testable import MediaSegmented
@testable import MediaStore
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport

final class MetricsTests: XCTestCase {
    func testAddressesTakeNumericHostsOrLocalhostAndAPort() {
        XCTAssertEqual(MetricsAddress("127.0.0.1:9101")?.port, 9101)
        XCTAssertEqual(MetricsAddress("localhost:9101")?.host, "127.0.0.1")
        XCTAssertEqual(MetricsAddress("[::1]:9101")?.family, .ipv6)
        XCTAssertTrue(MetricsAddress("[::1]:9101")!.isLoopback)
        XCTAssertFalse(MetricsAddress("0.0.0.0:9101")!.isLoopback)
        for bad in ["", "127.0.0.1", ":9101", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:-1", "host:9101",
                    "::1:9101", "[::1]", "127.0.0.1:99999999999999999999", "1.2.3.4.5:80"] {
            XCTAssertNil(MetricsAddress(bad), bad)
        }
    }

    func testHistogramBucketsAreCumulativeAndEndWithTheCount() {
        let histogram = Histogram(bounds: [0.1, 1])
        for value in [0.05, 0.5, 0.5, 5, -1, .nan] { histogram.observe(value) }
        let snapshot = histogram.snapshot
        XCTAssertEqual(snapshot.buckets.map(\.count), [3, 5, 6])
        XCTAssertEqual(snapshot.count, 6)
        XCTAssertTrue(snapshot.buckets.last!.bound.isInfinite)
        XCTAssertEqual(snapshot.sum, 6.05, accuracy: 1e-9)
    }

    func testResponseClassesFollowTheStatus() {
        XCTAssertEqual(Statistics.ResponseClass(status: 206).label, "2xx")
        XCTAssertEqual(Statistics.ResponseClass(status: 302).label, "3xx")
        XCTAssertEqual(Statistics.ResponseClass(status: 404).label, "4xx")
        XCTAssertEqual(Statistics.ResponseClass(status: 503).label, "5xx")
        XCTAssertEqual(Statistics.ResponseClass(status: 0).label, "error")
        XCTAssertEqual(Statistics.ResponseClass(status: 99_999).label, "error")
    }
}
