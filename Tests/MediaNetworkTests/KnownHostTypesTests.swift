import XCTest
@testable import MediaNetwork

/// Which key types a known_hosts holds for a server (the handshake asks for
/// one of those). The hashed lines are ssh-keygen -H's, of
/// `[media.example]:2222` and `seedbox.example`.
final class KnownHostTypesTests: XCTestCase {
    private let ed25519 = "AAAAC3NzaC1lZDI1NTE5AAAAIGPV8jn9K2f6NQMSNRK4bsepkleBNowbtteOBz4L28gE"
    private var hashed: String {
        """
        |1|L0yTZ8PrI5Efdfix/ehWMaM3y+8=|IVEOrh3sdj1bgRNG5r9MK//iqLA= ssh-ed25519 \(ed25519)
        |1|yb1+nIJLtQXlrg+jHKtLLFQJbMg=|009DPY53ocG5Q6NgfoLGtpPdZWg= ssh-ed25519 \(ed25519)
        """
    }

    func testPlainNames_portsInBrackets_fileOrder_eachTypeOnce() {
        let text = """
            # a comment
            seedbox.example,10.0.0.5 ssh-ed25519 \(ed25519)
            [seedbox.example]:2222 ecdsa-sha2-nistp256 AAAA
            seedbox.example ssh-rsa AAAA comment words
            SEEDBOX.example ssh-ed25519 \(ed25519)
            other.example ecdsa-sha2-nistp384 AAAA

            """
        XCTAssertEqual(KnownHostTypes.types(for: "seedbox.example", port: 22, in: text), ["ssh-ed25519", "ssh-rsa"])
        XCTAssertEqual(KnownHostTypes.types(for: "seedbox.example", port: 2222, in: text), ["ecdsa-sha2-nistp256"])
        XCTAssertEqual(KnownHostTypes.types(for: "10.0.0.5", port: 22, in: text), ["ssh-ed25519"])
        XCTAssertEqual(KnownHostTypes.types(for: "nowhere.example", port: 22, in: text), [])
    }

    func testHashedNames_matchTheirHostAndPortOnly() {
        XCTAssertEqual(KnownHostTypes.types(for: "media.example", port: 2222, in: hashed), ["ssh-ed25519"])
        XCTAssertEqual(KnownHostTypes.types(for: "seedbox.example", port: 22, in: hashed), ["ssh-ed25519"])
        XCTAssertEqual(KnownHostTypes.types(for: "media.example", port: 22, in: hashed), [])
        XCTAssertEqual(KnownHostTypes.types(for: "seedbox.example", port: 2222, in: hashed), [])
        XCTAssertEqual(KnownHostTypes.types(for: "x", port: 22, in: "|1|bad|base64 ssh-rsa AAAA"), [])
    }

    func testPatterns_wildcardsAndNegation_markedLinesNameNoKey() {
        let text = """
            *.example,!bad.example ssh-ed25519 \(ed25519)
            box?.lan ecdsa-sha2-nistp521 AAAA
            @revoked seedbox.example ssh-rsa AAAA
            @cert-authority *.example ssh-rsa AAAA
            """
        XCTAssertEqual(KnownHostTypes.types(for: "seedbox.example", port: 22, in: text), ["ssh-ed25519"])
        XCTAssertEqual(KnownHostTypes.types(for: "bad.example", port: 22, in: text), [])
        XCTAssertEqual(KnownHostTypes.types(for: "box1.lan", port: 22, in: text), ["ecdsa-sha2-nistp521"])
        XCTAssertEqual(KnownHostTypes.types(for: "box10.lan", port: 22, in: text), [])
        XCTAssertTrue(KnownHostTypes.wildcard(Array("*a*b".utf8), matches: Array("xxaxxb".utf8)))
        XCTAssertFalse(KnownHostTypes.wildcard(Array("*a*b".utf8), matches: Array("xxaxxbc".utf8)))
        XCTAssertTrue(KnownHostTypes.wildcard(Array("[h]:22*".utf8), matches: Array("[h]:2222".utf8)))
    }

    func testPreference_knownMethodsFirst_thenTheRestInLibssh2sOrder() {
        let supported = ["ecdsa-sha2-nistp256", "ssh-ed25519", "rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"]
        XCTAssertEqual(KnownHostTypes.preference(known: ["ssh-ed25519"], supported: supported),
                       "ssh-ed25519,ecdsa-sha2-nistp256,rsa-sha2-512,rsa-sha2-256,ssh-rsa")
        XCTAssertEqual(KnownHostTypes.preference(known: ["ssh-rsa", "ssh-ed25519"], supported: supported),
                       "rsa-sha2-512,rsa-sha2-256,ssh-rsa,ssh-ed25519,ecdsa-sha2-nistp256")
        XCTAssertNil(KnownHostTypes.preference(known: ["sk-ssh-ed25519@openssh.com"], supported: supported),
                     "a type libssh2 cannot verify leaves its own order")
        XCTAssertNil(KnownHostTypes.preference(known: [], supported: supported))
    }
}
