// The node id read from a FUSE file handle (fs/fuse/inode.c fuse_encode_fh:
// node id high word, low word, generation; the parent's three after them in
// a connectable handle), and the root's, known without asking.
import XCTest
@testable import MediaFS
#if canImport(Glibc)
import Glibc
#endif

final class KernelNodeTests: XCTestCase {
    /// The handle's bytes as the kernel writes its u32 words (host order).
    private func handle(_ words: [UInt32]) -> [UInt8] {
        words.flatMap { word in withUnsafeBytes(of: word) { Array($0) } }
    }

    func testNodeID_ofAFUSEHandle_isItsFirstTwoWords_highFirst() {
        XCTAssertEqual(KernelNode.nodeID(handleType: 0x81, bytes: handle([0, 2, 0])), 2)
        XCTAssertEqual(KernelNode.nodeID(handleType: 0x81, bytes: handle([1, 5, 7])), 1 << 32 | 5)
        XCTAssertEqual(KernelNode.nodeID(handleType: 0x82, bytes: handle([0, 9, 0, 0, 1, 0])), 9)
    }

    func testNodeID_ofAnotherKindOfHandle_orAShortOne_isNil() {
        XCTAssertNil(KernelNode.nodeID(handleType: 1, bytes: handle([0, 2, 0])))
        XCTAssertNil(KernelNode.nodeID(handleType: 0x81, bytes: handle([0, 2])))
    }

    func testID_ofTheRoot_isFUSERootID_withoutAsking() {
        XCTAssertEqual(try KernelNode.id(of: "", under: "/no/such/mount").get(), 1)
        XCTAssertEqual(try KernelNode.id(of: "/", under: "/no/such/mount").get(), 1)
    }

    func testID_ofAPathNotThere_isENOENT() {
        guard case .failure(let error) = KernelNode.id(of: "/sub", under: "/no/such/mount") else {
            return XCTFail("a handle of a path that does not exist")
        }
        XCTAssertEqual(error.errno, ENOENT)
    }

    func testID_ofAPathOnAFileSystemOtherThanFUSE_isRefused() throws {
        // tmpfs (or whatever holds /tmp) gives handles of its own kind, or none.
        let result = KernelNode.id(of: "/tmp", under: "/")
        if case .success(let id) = result { XCTFail("a node id \(id) read from a handle that is not FUSE's") }
    }
}
