// ArchiveReader over a FakeFetcher holding rarfile's volumes and zipfile's
// ZIPs: every volume's head is read at once in the first round, nothing
// is read whole, the members equal unar's extraction; the saved index
// reads back as it was, and a damaged or hostile one is no index.
import Foundation
import XCTest
@testable import MediaSources
@testable import MediaStore
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport

final class ArchiveReaderTests: XCTestCase {
    private var fake: FakeFetcher!

    override func setUp() {
        fake = FakeFetcher(chunkSize: 4096)
    }

    override func tearDown() {
        fake.shutdown()
    }

    private func serve(_ names: [String], under folder: String) throws -> [ArchiveReader.Volume] {
        try ArchiveFixtures.files(names, under: folder).map { file in
            fake.add("http://h.example/lib/\(file.name)", bytes: file.bytes)
            return ArchiveReader.Volume(name: file.name, url: "http://h.example/lib/\(file.name)")
        }
    }

    func testARAR5Set_isIndexedInTwoRoundsOfRangedReads_andItsMembersAreUnarsBytes() throws {
        let names = ["rar5-vols.part1.rar", "rar5-vols.part2.rar", "rar5-vols.part3.rar"]
        let volumes = try serve(names, under: "rar")
        let read = try ArchiveReader.index(.rar, volumes: volumes, fetcher: fake, timeout: 10, clock: .system)
        XCTAssertLessThanOrEqual(read.rounds, 2)
        XCTAssertTrue(fake.gets.allSatisfy { $0.range != nil && $0.range!.count <= ArchiveReader.headBytes })
        for url in volumes.map(\.url) { XCTAssertLessThanOrEqual(fake.gets.filter { $0.request.url == url }.count, 2) }
        let files = try ArchiveFixtures.files(names, under: "rar")
        let extracted = try ArchiveFixtures.directory().appendingPathComponent("extracted/rar5-vols.part1.rar")
        XCTAssertEqual(Set(read.index.members.map(\.path)), ["vols/bigfile.txt", "vols/smallfile.txt"])
        for member in read.index.members {
            let expected = [UInt8](try Data(contentsOf: extracted.appendingPathComponent(member.path)))
            XCTAssertEqual(ArchiveFixtures.contents(of: member, in: files), expected, member.path)
        }
        XCTAssertEqual(read.volumes.map(\.length), files.map { Int64($0.bytes.count) })
    }

    func testTheSavedIndex_readsBackAsItWas_andAHostileOneIsNone() throws {
        let volumes = try serve(["rar3-old.rar", "rar3-old.r00", "rar3-old.r01"], under: "rar")
        let read = try ArchiveReader.index(.rar, volumes: volumes, fetcher: fake, timeout: 10, clock: .system)
        let urls = volumes.map(\.url)
        let text = SavedArchiveIndex.encode(read, urls: urls)
        let back = try XCTUnwrap(SavedArchiveIndex.decode(text, urls: urls))
        XCTAssertEqual(back.index.members, read.index.members)
        XCTAssertEqual(back.volumes.map(\.length), read.volumes.map(\.length))
        XCTAssertEqual(back.volumes.map(\.etag), read.volumes.map(\.etag))
        XCTAssertNil(SavedArchiveIndex.decode(text, urls: Array(urls.reversed())), "other volumes")
        XCTAssertNil(SavedArchiveIndex.decode(text, urls: Array(urls.dropLast())))
        let member = try XCTUnwrap(text.split(separator: "\n").first { $0.hasPrefix("m") })
        for hostile in [member.replacingOccurrences(of: "\t0:", with: "\t7:"),
                        member + ",0:0-\(Int64.max)", "x" + member.dropFirst()] {
            XCTAssertNil(SavedArchiveIndex.decode(text.replacingOccurrences(of: member, with: hostile), urls: urls), hostile)
        }
    }

    func testAZip_isIndexedByRangesAndAVolumeThatIsNotOneFailsNamingIt() throws {
        let zip = try serve(["stored.zip"], under: "zip")
        let read = try ArchiveReader.index(.zip, volumes: zip, fetcher: fake, timeout: 10, clock: .system)
        XCTAssertEqual(Set(read.index.members.map(\.path)), ["film/a.bin", "café.txt", "empty"])
        fake.add("http://h.example/lib/fake.rar", bytes: [UInt8](repeating: 7, count: 200_000))
        XCTAssertThrowsError(try ArchiveReader.index(.rar, volumes: [.init(name: "fake.rar", url: "http://h.example/lib/fake.rar")],
                                                     fetcher: fake, timeout: 10, clock: .system)) { error in
            XCTAssertTrue("\(error)".contains("fake.rar"), "\(error)")
        }
    }
}
