import XCTest
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport

/// The pieces of SFTP reads and logins that need no server: ~/.netrc,
/// the head an SFTP read is given, a host key's fingerprint and refusals,
/// an mtime as a date. The sessions themselves are tested against a real
/// sshd (integration/test_sftp.py).
final class SSHTests: XCTestCase {
    // MARK: Netrc

    func testNetrc_machineEntry_givesItsLoginAndPassword_andDefaultIsTheFallback() {
        let netrc = Netrc(text: """
            machine seedbox.example login alice password s3cret
            default login anon password guest
            """)
        XCTAssertEqual(netrc?.credentials(host: "SEEDBOX.example", user: nil)?.login, "alice")
        XCTAssertEqual(netrc?.credentials(host: "seedbox.example", user: nil)?.password, "s3cret")
        XCTAssertEqual(netrc?.credentials(host: "other.example", user: nil)?.login, "anon")
    }

    func testNetrc_aURLUser_takesOnlyAnEntryOfThatLogin() {
        let netrc = Netrc(text: "machine h login alice password a\nmachine h login bob password b\n")
        XCTAssertEqual(netrc?.credentials(host: "h", user: "bob")?.password, "b")
        XCTAssertNil(netrc?.credentials(host: "h", user: "carol"))
    }

    func testNetrc_entriesAcrossLinesAndAccounts_areRead_andAMacroEndsTheTokens() {
        let netrc = Netrc(text: "machine h\n\tlogin u\n\taccount x\n\tpassword p\nmacdef init\ncd /\n\nmachine z login q password r\n")
        XCTAssertEqual(netrc?.credentials(host: "h", user: nil)?.password, "p")
        XCTAssertNil(netrc?.credentials(host: "z", user: nil), "what follows a macro is not read as entries")
    }

    func testNetrc_aTruncatedOrOversizedFile_isNotRead() {
        XCTAssertNil(Netrc(text: "machine h login u password"))
        XCTAssertNil(Netrc(text: "machine h password " + String(repeating: "x", count: Netrc.maxToken + 1)))
        XCTAssertNil(Netrc(text: String(repeating: "#", count: Netrc.maxBytes + 1)))
    }

    // MARK: RemoteFileHead

    func testRemoteFileHead_ofARange_is206WithTheRangeDeliveredAndNoTotal() {
        let head = RemoteFileHead.head(for: FetchRequest(url: "sftp://h/f", range: 100..<200), length: 100, mtime: 1_700_000_000)
        XCTAssertEqual(head.status, 206)
        XCTAssertEqual(head.contentRange?.range, 100..<200)
        XCTAssertNil(head.contentRange?.total)
        XCTAssertEqual(head.lastModified, "Tue, 14 Nov 2023 22:13:20 GMT")
    }

    func testRemoteFileHead_ofARangeCutAtTheEnd_namesOnlyTheBytesThatCome() {
        let head = RemoteFileHead.head(for: FetchRequest(url: "sftp://h/f", range: 900..<2000), length: 100, mtime: nil)
        XCTAssertEqual(head.contentRange?.range, 900..<1000)
        XCTAssertNil(head.lastModified)
    }

    func testRemoteFileHead_ofTheWholeFile_is200WithItsLength_andAnUnknownLengthNamesNone() {
        let whole = RemoteFileHead.head(for: FetchRequest(url: "sftp://h/f"), length: 4096, mtime: nil)
        XCTAssertEqual(whole.status, 200)
        XCTAssertEqual(whole.contentLength, 4096)
        XCTAssertNil(RemoteFileHead.head(for: FetchRequest(url: "sftp://h/f"), length: -1, mtime: nil).contentLength)
        XCTAssertNil(RemoteFileHead.head(for: FetchRequest(url: "sftp://h/f", range: 0..<10), length: 0, mtime: nil).contentRange,
                     "an empty answer to a range names no range: the loader refuses it")
    }

    // MARK: Host keys

    func testFingerprint_isSHA256InUnpaddedBase64_asSSHKeygenPrintsIt() {
        let key = SSHHostKey(type: "ED25519", sha256: Array(repeating: 0, count: 32))
        XCTAssertEqual(key.fingerprint, "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
    }

    func testRefusals_nameTheHostThePortTheFingerprintAndTheFile() {
        let key = SSHHostKey(type: "ED25519", sha256: Array(0..<32))
        let unknown = key.refusal(.unknown, host: "box.example", port: 2222, knownHosts: "/k")
        XCTAssertEqual(unknown.errno, EACCES)
        XCTAssertTrue(unknown.message.contains("[box.example]:2222: unknown host key ED25519 \(key.fingerprint)"),
                      unknown.message)
        let changed = key.refusal(.mismatch, host: "box.example", port: 22, knownHosts: "/k")
        XCTAssertTrue(changed.message.hasPrefix("box.example: HOST KEY CHANGED"), changed.message)
        XCTAssertTrue(changed.message.contains(key.fingerprint) && changed.message.contains("/k"), changed.message)
    }

    // MARK: Dates

    func testAnMtime_isAnHTTPDateThatParsesBackToIt() {
        for seconds: Int64 in [0, 1, 951_782_400, 1_700_000_000, 4_102_444_799, 253_402_300_799] {
            let text = HTTPDate.text(seconds: seconds)
            XCTAssertNotNil(text, "\(seconds)")
            XCTAssertEqual(text.flatMap(HTTPDate.seconds).map(Int64.init), seconds, text ?? "")
        }
        XCTAssertEqual(HTTPDate.text(seconds: 0), "Thu, 01 Jan 1970 00:00:00 GMT")
        XCTAssertNil(HTTPDate.text(seconds: 253_402_300_800), "year 10000")
        XCTAssertNil(HTTPDate.text(seconds: Int64.max))
    }

    // MARK: Paths

    func testRemotePath_decodesEscapes_andATildeIsTheHome() {
        XCTAssertEqual(SFTPSession.remotePath("/srv/my%20films/"), "/srv/my films/")
        XCTAssertEqual(SFTPSession.remotePath("/~/films/"), "films/")
        XCTAssertEqual(SFTPSession.remotePath("/~/"), ".")
        XCTAssertEqual(SFTPSession.remotePath(""), "/")
    }
}
