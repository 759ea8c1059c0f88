// What `s3://` sources are mounted with, settled once before mounting: the
// endpoint (`--s3-endpoint`, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the
// profile's `s3 = endpoint_url` or `endpoint_url`; else AWS), the region
// (`--s3-region`, AWS_REGION, AWS_DEFAULT_REGION, the profile's `region`;
// else us-east-1) and the keys (S3Credentials). The options carry no
// secret: keys come from the environment or the AWS files only.
import Foundation
import MediaSupport
import MediaStore
import MediaNetwork

package struct S3Settings: Sendable, Equatable {
    package static let defaultRegion = "us-east-1"

    /// `--s3-endpoint`, `--s3-region`, `--s3-profile`.
    package var endpoint: String?
    package var region: String?
    package var profile: String?

    package init(endpoint: String? = nil, region: String? = nil, profile: String? = nil) {
        self.endpoint = endpoint
        self.region = region
        self.profile = profile
    }

    /// The endpoint and keys, or an error naming the setting at fault.
    package func resolve(environment: [String: String]) throws -> S3Mount {
        let profile = AWSProfile(name: self.profile, environment: environment)
        let config = try profile.configSettings()
        let given = { (name: String) in environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        let region = self.region ?? given("AWS_REGION") ?? given("AWS_DEFAULT_REGION") ?? config["region"]
            ?? Self.defaultRegion
        guard !region.isEmpty, region.utf8.count <= 64,
              region.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }) else {
            throw MediaError(EINVAL, "S3 region '\(region)': expected a name such as eu-west-1")
        }
        var custom: String?
        if let endpoint {
            custom = try S3Endpoint.checkedCustom(endpoint, origin: "--s3-endpoint")
        } else if let name = ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"].first(where: { given($0) != nil }) {
            custom = try S3Endpoint.checkedCustom(given(name)!, origin: name)
        } else if let url = config["s3.endpoint_url"] ?? config["endpoint_url"] {
            custom = try S3Endpoint.checkedCustom(url, origin: "endpoint_url of profile '\(profile.name)'")
        }
        let credentials = try S3Credentials.resolve(environment: environment, profile: profile)
        return S3Mount(endpoint: S3Endpoint(custom: custom, region: region), credentials: credentials)
    }
}

/// The settled settings: where buckets are, and what signs for them.
package struct S3Mount: Sendable, Equatable {
    package var endpoint: S3Endpoint
    /// nil: anonymous, every request unsigned.
    package var credentials: S3Credentials?

    package init(endpoint: S3Endpoint, credentials: S3Credentials?) {
        self.endpoint = endpoint
        self.credentials = credentials
    }

    package static func == (a: S3Mount, b: S3Mount) -> Bool {
        a.endpoint == b.endpoint && a.credentials === b.credentials
    }

    /// The S3 origins the buckets of these `s3://` arguments are at, once each.
    package func origins(forArguments arguments: [String]) throws -> [S3Origin] {
        var seen: [S3Origin] = []
        for argument in arguments where S3Prefix.isS3(argument) {
            let prefix = try S3Prefix(argument: argument, endpoint: endpoint)
            guard let origin = HTTPOrigin(url: prefix.bucketURL) else { continue }
            if !seen.contains(where: { $0.origin == origin }) {
                seen.append(S3Origin(origin: origin, region: endpoint.region, credentials: credentials))
            }
        }
        return seen
    }
}
