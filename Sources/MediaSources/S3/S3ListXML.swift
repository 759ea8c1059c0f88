// The XML S3 answers with, read by FoundationXML's streaming XMLParser (over
// libxml2): a ListObjectsV2 page (ListBucketResult: Contents, CommonPrefixes,
// IsTruncated, NextContinuationToken) and an error (Error: Code, Message,
// Region, Endpoint). Only those elements are kept, each text cut at
// `maxText` bytes (the entry then marked), so a page costs its entries and
// no more; no external entity is resolved, a declared one stops the parse
// where the parser reports it, and libxml2 refuses exponential expansion
// ("billion laughs") on its own. What the values mean (sizes,
// names, dates) is S3Prefix's to judge.
import Foundation
import FoundationXML
import MediaSupport
import MediaStore
import MediaNetwork

/// One page of a ListObjectsV2 answer, its values as the server wrote them.
package struct S3ListPage: Equatable, Sendable {
    package struct Object: Equatable, Sendable {
        package var key: String?
        package var size: String?
        package var etag: String?
        package var lastModified: String?
        /// A value was longer than `S3ListXML.maxText`.
        package var tooLong = false
    }

    package var objects: [Object] = []
    /// CommonPrefixes' Prefix values, each ending in the delimiter.
    package var prefixes: [String] = []
    package var isTruncated = false
    package var nextContinuationToken: String?
}

/// The body of an S3 error answer.
package struct S3ErrorAnswer: Equatable, Sendable {
    package var code: String?
    package var message: String?
    /// The bucket's region (AuthorizationHeaderMalformed, PermanentRedirect).
    package var region: String?
    /// The endpoint to use instead (PermanentRedirect).
    package var endpoint: String?
}

package enum S3ListXML {
    /// No key, token or date S3 writes comes near this (keys: 1,024 bytes).
    package static let maxText = 4096

    /// A ListObjectsV2 page, or a MediaError saying where the XML broke.
    package static func page(_ data: Data) throws -> S3ListPage {
        let reader = Reader(root: "ListBucketResult")
        try reader.run(data)
        return reader.page
    }

    /// The error an answer's body describes; nil when it is no S3 error XML.
    package static func error(_ data: Data) -> S3ErrorAnswer? {
        let reader = Reader(root: "Error")
        guard (try? reader.run(data)) != nil else { return nil }
        return reader.error
    }

    private final class Reader: NSObject, XMLParserDelegate {
        let root: String
        var page = S3ListPage()
        var error = S3ErrorAnswer()
        /// The open elements' names, outermost first.
        private var path: [String] = []
        private var object = S3ListPage.Object()
        private var text = ""
        private var capturing = false
        private var textTooLong = false
        private var wrongRoot = false
        private var declaresEntity = false
        private var sawRoot = false

        init(root: String) {
            self.root = root
        }

        func run(_ data: Data) throws {
            let parser = XMLParser(data: data)
            parser.shouldResolveExternalEntities = false
            parser.shouldProcessNamespaces = false
            parser.delegate = self
            let parsed = parser.parse()
            if wrongRoot { throw MediaError.io("the answer is not <\(root)> XML") }
            if declaresEntity { throw MediaError.io("the answer declares XML entities") }
            guard parsed else {
                let reason = parser.parserError.map { "\($0.localizedDescription)" } ?? "unknown error"
                throw MediaError.io("malformed XML at line \(parser.lineNumber): \(reason)")
            }
            guard sawRoot else { throw MediaError.io("the answer holds no <\(root)>") }
            guard path.isEmpty else { throw MediaError.io("the XML ends inside <\(path.last!)>") }
        }

        /// Whether the element just opened holds a value kept.
        private func isValue(_ path: [String]) -> Bool {
            switch path.count {
            case 2: return ["IsTruncated", "NextContinuationToken", "Code", "Message", "Region", "Endpoint"]
                .contains(path[1])
            case 3: return (path[1] == "Contents" && ["Key", "Size", "ETag", "LastModified"].contains(path[2]))
                || (path[1] == "CommonPrefixes" && path[2] == "Prefix")
            default: return false
            }
        }

        func parser(_ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?,
                    qualifiedName qName: String?, attributes attributeDict: [String: String] = [:]) {
            if path.isEmpty {
                guard elementName == root else {
                    wrongRoot = true
                    parser.abortParsing()
                    return
                }
                sawRoot = true
            }
            path.append(elementName)
            if path.count == 2 && elementName == "Contents" { object = S3ListPage.Object() }
            capturing = isValue(path)
            text = ""
            textTooLong = false
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) {
            guard capturing else { return }
            append(string)
        }

        func parser(_ parser: XMLParser, foundCDATA CDATABlock: Data) {
            guard capturing else { return }
            append(String(decoding: CDATABlock, as: UTF8.self))
        }

        private func append(_ string: String) {
            guard !textTooLong else { return }
            if text.utf8.count + string.utf8.count > S3ListXML.maxText {
                textTooLong = true
                text = ""
            } else {
                text += string
            }
        }

        func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?,
                    qualifiedName qName: String?) {
            if capturing { keep(text, tooLong: textTooLong) }
            capturing = false
            if path.count == 2 && elementName == "Contents" { page.objects.append(object) }
            path.removeLast()
        }

        private func keep(_ value: String, tooLong: Bool) {
            switch (path.count, path.count > 1 ? path[1] : "", path.last ?? "") {
            case (2, "IsTruncated", _): page.isTruncated = value.trimmingSpaces == "true"
            case (2, "NextContinuationToken", _): page.nextContinuationToken = tooLong ? nil : value
            case (2, "Code", _): error.code = value
            case (2, "Message", _): error.message = value
            case (2, "Region", _): error.region = value
            case (2, "Endpoint", _): error.endpoint = value
            case (3, "CommonPrefixes", _): if !tooLong { page.prefixes.append(value) }
            case (3, "Contents", let field):
                object.tooLong = object.tooLong || tooLong
                switch field {
                case "Key": object.key = value
                case "Size": object.size = value
                case "ETag": object.etag = value
                default: object.lastModified = value
                }
            default: break
            }
        }

        func parser(_ parser: XMLParser, foundInternalEntityDeclarationWithName name: String, value: String?) {
            declaresEntity = true
            parser.abortParsing()
        }

        func parser(_ parser: XMLParser, foundExternalEntityDeclarationWithName name: String, publicID: String?,
                    systemID: String?) {
            declaresEntity = true
            parser.abortParsing()
        }
    }
}
