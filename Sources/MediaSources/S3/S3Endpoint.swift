// Where a bucket's objects are as plain http(s) URLs, so reading them is
// the HTTP read path unchanged: path-style `ENDPOINT/bucket/key` for an
// `--s3-endpoint` (MinIO, B2, R2, Ceph, moto), virtual-host
// `https://bucket.s3.REGION.amazonaws.com/key` on AWS (path-style there for
// a bucket with dots in its name, which a wildcard certificate cannot
// match). Keys are percent-encoded as SigV4 encodes them, every byte but
// A-Z a-z 0-9 `-_.~` (and `/` in a path), so the URL sent is the URL signed.
import Foundation
import MediaSupport
import MediaStore
import MediaNetwork

package struct S3Endpoint: Sendable, Equatable {
    /// `scheme://host[:port][/path]` without a trailing slash; nil: AWS.
    package var custom: String?
    package var region: String

    package init(custom: String?, region: String) {
        self.custom = custom
        self.region = region
    }

    /// The URL listings of the bucket are asked at, ending in `/`.
    package func bucketURL(_ bucket: String) -> String {
        if let custom { return "\(custom)/\(bucket)/" }
        if bucket.contains(".") { return "https://s3.\(region).amazonaws.com/\(bucket)/" }
        return "https://\(bucket).s3.\(region).amazonaws.com/"
    }

    /// The plain URL of an object.
    package func objectURL(bucket: String, key: String) -> String {
        bucketURL(bucket) + Self.encode(key, keepingSlash: true)
    }

    /// Percent-encoding as SigV4 canonicalizes: unreserved bytes as they
    /// are, every other byte as `%XX` in upper case; `/` kept in a path.
    package static func encode(_ text: String, keepingSlash: Bool = false) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."),
                 UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: "/") where keepingSlash:
                out.append("/")
            default:
                let hex = Array("0123456789ABCDEF".unicodeScalars)
                out.unicodeScalars.append("%")
                out.unicodeScalars.append(hex[Int(byte >> 4)])
                out.unicodeScalars.append(hex[Int(byte & 0xF)])
            }
        }
        return out
    }

    /// A bucket name S3 allows (3–63 lower-case letters, digits, `.` and
    /// `-`; `_` and capitals too, which older buckets and other stores
    /// take), so it can stand in a host name or a path unencoded.
    package static func isBucketName(_ name: String) -> Bool {
        (3...63).contains(name.utf8.count) && name.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "-"), UInt8(ascii: "_"):
                return true
            default:
                return false
            }
        }
    }

    /// An `--s3-endpoint` (or `endpoint_url`) value: an http(s) URL with a
    /// host and no query, returned without its trailing slash.
    package static func checkedCustom(_ text: String, origin: String) throws -> String {
        guard let url = MediaURL(text), url.isHTTP, HTTPOrigin(url) != nil, url.query == nil, url.fragment == nil,
              url.user == nil, url.password == nil else {
            throw MediaError(EINVAL, "\(origin) '\(MediaError.redacted(text))': expected an http(s) URL such as "
                             + "http://127.0.0.1:9000 or https://s3.eu-central-003.backblazeb2.com")
        }
        var base = text
        while base.hasSuffix("/") { base.removeLast() }
        return base
    }
}
