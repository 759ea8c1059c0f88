import Foundation
import XCTest
@testable import MediaSources
@testable import MediaStore
@testable import MediaNetwork
@testable import MediaSupport
@testable import MediaTestSupport

final class S3CredentialsTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory = try TemporaryDirectory.make("s3credentials")
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func write(_ name: String, _ text: String) -> String {
        let path = directory + "/" + name
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(text.utf8)), path)
        return path
    }

    private func environment(_ extra: [String: String] = [:]) -> [String: String] {
        ["HOME": directory, "AWS_SHARED_CREDENTIALS_FILE": directory + "/credentials",
         "AWS_CONFIG_FILE": directory + "/config"].merging(extra) { $1 }
    }

    // MARK: The INI files

    func testConfigFile_sectionsCommentsCaseAndSubsections() throws {
        let file = try AWSConfigFile(text: """
            # a comment
            [default]
            region = eu-west-1
            ; another comment
            [profile work]
            Region: eu-central-1
            aws_secret_access_key = abc#def=
            s3 =
              endpoint_url = http://127.0.0.1:9000
              addressing_style = path
            """, path: "config")
        XCTAssertEqual(file.profile("default", isConfig: true)?["region"], "eu-west-1")
        let work = file.profile("work", isConfig: true)
        XCTAssertEqual(work?["region"], "eu-central-1")
        XCTAssertEqual(work?["aws_secret_access_key"], "abc#def=", "no inline comments, as configparser")
        XCTAssertEqual(work?["s3.endpoint_url"], "http://127.0.0.1:9000")
        XCTAssertEqual(work?["s3.addressing_style"], "path")
        XCTAssertNil(file.profile("work", isConfig: false), "the credentials file has no 'profile ' prefix")
    }

    func testConfigFile_badLine_namesTheLineButNotItsText() {
        XCTAssertThrowsError(try AWSConfigFile(text: "[default]\naws_secret_access_key\n", path: "credentials")) { error in
            XCTAssertEqual("\(error)", "credentials:2: expected 'key = value'")
        }
        XCTAssertThrowsError(try AWSConfigFile(text: "key = value\n", path: "c"))
    }

    // MARK: Where the keys come from

    func testResolve_environmentWinsOverTheFiles() throws {
        _ = write("credentials", "[default]\naws_access_key_id = FILE\naws_secret_access_key = file\n")
        let env = environment(["AWS_ACCESS_KEY_ID": "ENV", "AWS_SECRET_ACCESS_KEY": "env", "AWS_SESSION_TOKEN": "tok"])
        let credentials = try XCTUnwrap(S3Credentials.resolve(environment: env, profile: AWSProfile(environment: env)))
        XCTAssertEqual(credentials.current(), S3Key(accessKeyID: "ENV", secretAccessKey: "env", sessionToken: "tok"))
        XCTAssertEqual(credentials.description, "AWS_ACCESS_KEY_ID from the environment")
    }

    func testResolve_halfTheEnvironment_isAnError() {
        let env = environment(["AWS_ACCESS_KEY_ID": "ENV"])
        XCTAssertThrowsError(try S3Credentials.resolve(environment: env, profile: AWSProfile(environment: env)))
    }

    func testResolve_profileFromTheCredentialsFile_thenTheConfigFile() throws {
        _ = write("credentials", "[other]\naws_access_key_id = O\naws_secret_access_key = o\n")
        _ = write("config", "[profile work]\naws_access_key_id = W\naws_secret_access_key = w\naws_session_token = t\n")
        let env = environment(["AWS_PROFILE": "work"])
        let credentials = try XCTUnwrap(S3Credentials.resolve(environment: env, profile: AWSProfile(environment: env)))
        XCTAssertEqual(credentials.current(), S3Key(accessKeyID: "W", secretAccessKey: "w", sessionToken: "t"))
        XCTAssertEqual(credentials.description, "profile 'work' of \(directory)/config")
    }

    func testResolve_noKeysAnywhere_isAnonymous_butAMissingNamedProfileIsAnError() throws {
        let env = environment()
        XCTAssertNil(try S3Credentials.resolve(environment: env, profile: AWSProfile(environment: env)))
        XCTAssertThrowsError(try S3Credentials.resolve(environment: env, profile: AWSProfile(name: "gone", environment: env)))
    }

    func testResolve_roleProfile_saysMediafsDoesNotRunIt() {
        _ = write("config", "[profile sso]\nsso_session = corp\n")
        let env = environment()
        XCTAssertThrowsError(try S3Credentials.resolve(environment: env, profile: AWSProfile(name: "sso", environment: env))) {
            XCTAssertEqual(($0 as? MediaError)?.errno, ENOTSUP)
        }
    }

    func testCurrent_rereadsTheFileWhenItChanges() throws {
        let path = write("credentials", "[default]\naws_access_key_id = A\naws_secret_access_key = a\naws_session_token = one\n")
        let env = environment()
        let credentials = try XCTUnwrap(S3Credentials.resolve(environment: env, profile: AWSProfile(environment: env)))
        XCTAssertEqual(credentials.current().sessionToken, "one")
        // Longer, so the size differs even within the file system's time granularity.
        _ = write("credentials", "[default]\naws_access_key_id = A\naws_secret_access_key = a\naws_session_token = two-2\n")
        XCTAssertEqual(credentials.current().sessionToken, "two-2")
        // A broken rewrite keeps the keys read before.
        _ = write("credentials", "garbage\n")
        XCTAssertEqual(credentials.current().sessionToken, "two-2")
        XCTAssertEqual(path, directory + "/credentials")
    }

    // MARK: Settings and signing

    func testSettings_regionAndEndpointFromTheProfile_optionsWin() throws {
        _ = write("config", "[default]\nregion = eu-west-3\ns3 =\n  endpoint_url = http://127.0.0.1:9000/\n")
        let fromProfile = try S3Settings().resolve(environment: environment())
        XCTAssertEqual(fromProfile.endpoint, S3Endpoint(custom: "http://127.0.0.1:9000", region: "eu-west-3"))
        XCTAssertNil(fromProfile.credentials)
        let given = try S3Settings(endpoint: "https://s3.example", region: "auto").resolve(environment: environment())
        XCTAssertEqual(given.endpoint, S3Endpoint(custom: "https://s3.example", region: "auto"))
        XCTAssertThrowsError(try S3Settings(endpoint: "ftp://x").resolve(environment: environment()))
    }

    func testS3Origin_signsOnlyRequestsThatStartAndStayAtTheEndpoint() throws {
        var options = HTTPOptions()
        let credentials = S3Credentials(key: S3Key(accessKeyID: "A", secretAccessKey: "a"))
        options.s3Origins = [S3Origin(origin: try XCTUnwrap(HTTPOrigin(url: "http://127.0.0.1:9000/")),
                                      region: "us-east-1", credentials: credentials)]
        let object = "http://127.0.0.1:9000/media/a.mkv"
        XCTAssertTrue(options.s3(for: object, first: object)?.credentials === credentials)
        XCTAssertNotNil(options.s3(for: object, first: "http://other.example/x"))
        XCTAssertNil(options.s3(for: object, first: "http://other.example/x")?.credentials,
                     "a redirect from elsewhere to the endpoint is not signed")
        XCTAssertNil(options.s3(for: "http://cdn.example/a.mkv", first: object), "a redirect away is not S3")
        XCTAssertEqual(options.s3Origins.first?.sigV4, "aws:amz:us-east-1:s3")
    }
}
