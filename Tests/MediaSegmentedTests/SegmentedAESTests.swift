// AES-128 segments through SegmentedFetcher: each segment's plain length is
// learned from its last two cipher blocks (one 32-byte GET; no HEAD when the
// playlist gives byte ranges), and a range read from anywhere, mid-block
// and across segments, is the plain text to the byte. The cipher texts are
// made here with libcrypto's encryptor, PKCS#7 padding on.
import CCrypto
import XCTest
@testable import MediaSegmented
@testable import MediaSources
@testable import MediaStore
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport

final class SegmentedAESTests: XCTestCase {
    private let url = "http://h.example/v/index.m3u8"
    private let key: [UInt8] = (0..<16).map { UInt8($0 * 11 + 3) }
    private var fake: FakeFetcher!
    private var plains: [[UInt8]] = []
    private var ivs: [[UInt8]] = []

    override func setUp() {
        fake = FakeFetcher(chunkSize: 100)
        // Lengths that end mid-block, on a block, and one under a block.
        plains = [1000, 1024, 7].enumerated().map { index, count in
            (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ index &* 7) }
        }
        ivs = plains.indices.map { index in (0..<16).map { UInt8(truncatingIfNeeded: $0 == 15 ? index : 0) } }
    }

    override func tearDown() {
        fake.shutdown()
    }

    static func encrypt(_ plain: [UInt8], key: [UInt8], iv: [UInt8]) -> [UInt8] {
        let context = EVP_CIPHER_CTX_new()!
        defer { EVP_CIPHER_CTX_free(context) }
        precondition(EVP_EncryptInit_ex(context, EVP_aes_128_cbc(), nil, key, iv) == 1)
        var out = [UInt8](repeating: 0, count: plain.count + 32)
        var first: Int32 = 0
        var last: Int32 = 0
        precondition(EVP_EncryptUpdate(context, &out, &first, plain, Int32(plain.count)) == 1)
        out.withUnsafeMutableBufferPointer { buffer in
            precondition(EVP_EncryptFinal_ex(context, buffer.baseAddress! + Int(first), &last) == 1)
        }
        return Array(out[..<Int(first + last)])
    }

    private var ciphers: [[UInt8]] { plains.indices.map { Self.encrypt(plains[$0], key: key, iv: ivs[$0]) } }

    private func vod(byteRanges: Bool) -> SegmentedVOD {
        let ciphers = self.ciphers
        var offset: Int64 = 0
        var parts: [SegmentedVOD.Part] = []
        for index in ciphers.indices {
            let encryption = HLSPlaylist.Encryption(keyURL: "http://h.example/v/key", iv: ivs[index])
            if byteRanges {
                parts.append(.init(url: "http://h.example/v/all.ts", range: offset..<(offset + Int64(ciphers[index].count)),
                                   encryption: encryption))
                offset += Int64(ciphers[index].count)
            } else {
                fake.add("http://h.example/v/s\(index).ts", bytes: ciphers[index])
                parts.append(.init(url: "http://h.example/v/s\(index).ts", range: nil, encryption: encryption))
            }
        }
        if byteRanges { fake.add("http://h.example/v/all.ts", bytes: ciphers.flatMap { $0 }) }
        return SegmentedVOD(url: url, parts: parts, contentType: "video/mp2t", keys: ["http://h.example/v/key": key])
    }

    private final class Collector: TransferDelegate, @unchecked Sendable {
        let done = OneShot<MediaError?>()
        let state = Locked<(heads: [ResponseHead], body: [UInt8])>(([], []))
        func transfer(_ id: TransferID, receiveHead head: ResponseHead) -> Bool {
            state.withLock { $0.heads.append(head) }
            return true
        }
        func transfer(_ id: TransferID, receiveBody bytes: UnsafeRawBufferPointer) -> Bool {
            state.withLock { $0.body += bytes }
            return true
        }
        func transfer(_ id: TransferID, completeWith error: MediaError?) { done.fulfil(error) }
    }

    private func fetch(_ fetcher: SegmentedFetcher, _ request: FetchRequest) -> (head: ResponseHead?, body: [UInt8], error: MediaError?) {
        let collector = Collector()
        fetcher.start(request, delegate: collector)
        guard let error = collector.done.wait(until: .after(seconds: 10, clock: .system)) else {
            XCTFail("the transfer did not end")
            return (nil, [], nil)
        }
        let state = collector.state.withLock { $0 }
        return (state.heads.first, state.body, error)
    }

    func testThePlainLength_isLearnedFromTheLastTwoBlocks_andEveryRangeDecrypts() throws {
        let fetcher = SegmentedFetcher(clock: .system, base: fake, vods: [vod(byteRanges: false)])
        let whole = plains.flatMap { $0 }
        let head = fetch(fetcher, FetchRequest(url: url, method: .head))
        XCTAssertEqual(head.head?.contentLength, Int64(whole.count))
        XCTAssertEqual(fake.heads.count, 3)
        // In parallel: in any order.
        XCTAssertEqual(fake.gets.sorted { $0.request.url < $1.request.url }.map(\.range),
                       [1008 - 32..<1008, 1040 - 32..<1040, 0..<16])
        for range in [0..<2031, 1..<2, 15..<17, 16..<32, 999..<1001, 1000..<1016, 1017..<2030, 2024..<2031, 500..<2031] {
            let read = fetch(fetcher, FetchRequest(url: url, range: Int64(range.lowerBound)..<Int64(range.upperBound)))
            XCTAssertNil(read.error, "\(range)")
            XCTAssertEqual(read.head?.contentRange?.range, Int64(range.lowerBound)..<Int64(range.upperBound))
            XCTAssertEqual(read.body, Array(whole[range]), "\(range)")
        }
        XCTAssertEqual(fake.heads.count, 3, "lengths learned once")
    }

    func testAMidSegmentRead_asksFromTheBlockBefore_itsIV() throws {
        let fetcher = SegmentedFetcher(clock: .system, base: fake, vods: [vod(byteRanges: true)])
        XCTAssertEqual(fetch(fetcher, FetchRequest(url: url, method: .head)).head?.contentLength, 2031)
        XCTAssertEqual(fake.heads.count, 0, "byte ranges give the cipher lengths")
        let before = fake.gets.count
        let read = fetch(fetcher, FetchRequest(url: url, range: 1050..<1060))
        XCTAssertEqual(read.body, Array(plains.flatMap { $0 }[1050..<1060]))
        // Plain 50..<60 of segment 2 is in its block 3; block 2 is its IV.
        XCTAssertEqual(fake.gets.dropFirst(before).map(\.range), [1008 + 32..<1008 + 64])
    }

    func testAWrongKey_failsTheLength_neverServesGarbage() throws {
        let vod = self.vod(byteRanges: true)
        let wrong = SegmentedVOD(url: url, parts: vod.parts, contentType: vod.contentType,
                                 keys: ["http://h.example/v/key": [UInt8](repeating: 9, count: 16)])
        let fetcher = SegmentedFetcher(clock: .system, base: fake, vods: [wrong])
        let read = fetch(fetcher, FetchRequest(url: url, range: 0..<100))
        XCTAssertEqual(read.error?.errno, EIO)
        XCTAssertEqual(read.body, [])
    }

    func testPlainLength_refusesWhatIsNotWholeBlocks() {
        XCTAssertNil(AES128CBC.plainLength(cipherLength: 20, previous: ivs[0], last: Array(ciphers[0].suffix(16)), key: key))
        XCTAssertNil(AES128CBC.plainLength(cipherLength: 0, previous: ivs[0], last: [], key: key))
        XCTAssertEqual(AES128CBC.plainLength(cipherLength: 16, previous: ivs[2], last: ciphers[2], key: key), 7)
    }
}
