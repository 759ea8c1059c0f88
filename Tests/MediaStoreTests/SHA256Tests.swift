import XCTest
@testable import MediaStore
@testable import MediaSupport
@testable import MediaTestSupport

final class SHA256Tests: XCTestCase {
    func testHex_ofEmptyInput_matchesStandardVector() {
        XCTAssertEqual(SHA256.hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    func testHex_ofAbc_matchesStandardVector() {
        XCTAssertEqual(SHA256.hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    func testHex_of448BitMessage_matchesStandardVector() {
        XCTAssertEqual(SHA256.hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
                       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    }

    func testHex_of896BitMessage_matchesStandardVector() {
        let message = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"
        XCTAssertEqual(SHA256.hex(message), "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1")
    }

    func testHex_ofOneMillionAs_matchesStandardVector() {
        XCTAssertEqual(SHA256.hex([UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)),
                       "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    func testHex_ofBytesAndOfTheirString_agree() {
        XCTAssertEqual(SHA256.hex(Array("https://example.com/a.mp4".utf8)), SHA256.hex("https://example.com/a.mp4"))
    }
}
