// An S3 endpoint's origin as requests see it: which origin is S3 (its paths
// are object keys, sent as they are), in which region, and the keys that
// sign requests to it (none: anonymous). CurlHop asks `HTTPOptions.s3(for:
// first:)` at every hop, so every request to the endpoint (a listing page,
// a file's ranged GET, a retry, a resumed transfer) is signed by libcurl's
// SigV4 at the moment it is sent, with the keys current then; a redirect to
// another origin is never signed.
import MediaSupport

package struct S3Origin: Sendable, Equatable {
    package var origin: HTTPOrigin
    package var region: String
    package var credentials: S3Credentials?

    package init(origin: HTTPOrigin, region: String, credentials: S3Credentials?) {
        self.origin = origin
        self.region = region
        self.credentials = credentials
    }

    /// SHA-256 of no bytes: the payload of every request mediafs sends.
    package static let emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    /// `CURLOPT_AWS_SIGV4`'s value: provider, region, service.
    package var sigV4: String { "aws:amz:\(region):s3" }

    package static func == (a: S3Origin, b: S3Origin) -> Bool {
        a.origin == b.origin && a.region == b.region && a.credentials === b.credentials
    }
}

extension HTTPOptions {
    /// The S3 origin a hop to `url` reaches, when it is one; its
    /// credentials only when `first` (the URL asked for) is at that origin too.
    package func s3(for url: String, first: String) -> S3Origin? {
        guard !s3Origins.isEmpty, let origin = HTTPOrigin(url: url),
              var s3 = s3Origins.first(where: { $0.origin == origin }) else { return nil }
        if url != first && HTTPOrigin(url: first) != origin { s3.credentials = nil }
        return s3
    }
}
