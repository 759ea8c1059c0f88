// The XML of a WebDAV PROPFIND answer (RFC 4918 multistatus), read with
// FoundationXML's streaming parser, namespace-aware: DAV: elements under any
// prefix (or none), other namespaces ignored. Each <response> is handed over
// as it ends and nothing of it is kept, so memory is the answer's bytes and
// what the caller makes of them: no tree is built.
// It reads values only; which hrefs count, and whether a value is usable,
// is WebDAVIndex's business.
import Foundation
import MediaSupport
#if canImport(FoundationXML)
import FoundationXML
#endif
import MediaStore
import MediaNetwork

package enum PropfindReader {
    /// One <response>: its href and the properties its 2xx propstats gave.
    package struct Response: Equatable, Sendable {
        package var href = ""
        package var isCollection = false
        package var contentLength: String?
        package var lastModified: String?
        package var etag: String?
        package var contentType: String?
        /// A collection's `getctag` (calendarserver.org's namespace): some
        /// servers change it whenever anything inside does.
        package var ctag: String?
        /// Why the entry cannot be used (a value too long, a failed status);
        /// nil when it can.
        package var defect: String?

        package init(href: String = "") { self.href = href }
    }

    /// A value longer than this (an href, a size, a date) is not one.
    package static let maxValueBytes = 8 << 10

    /// Calls `each` with every response of `xml`, in document order. Throws a
    /// MediaError (EIO) saying so when `xml` is not XML, or not a multistatus.
    package static func read(_ xml: Data, each: (Response) -> Void) throws {
        try withoutActuallyEscaping(each) { each in
            let reader = Reader(each: each)
            // From a stream the parser takes the bytes in chunks: given the
            // whole of a 50 MB answer at once, it fails at its end.
            let parser = XMLParser(stream: InputStream(data: xml))
            parser.shouldProcessNamespaces = true
            parser.shouldReportNamespacePrefixes = false
            parser.shouldResolveExternalEntities = false
            parser.delegate = reader
            let parsed = parser.parse()
            if let wrongRoot = reader.wrongRoot {
                throw MediaError.io("the answer is not a WebDAV multistatus (its XML starts with <\(wrongRoot)>)")
            }
            // A document cut short parses "successfully", with an error set.
            guard parsed, parser.parserError == nil else {
                let why = parser.parserError.map { "\($0.localizedDescription)" } ?? "unknown error"
                throw MediaError.io("the answer is not well-formed XML (line \(parser.lineNumber): \(why))")
            }
            guard reader.sawRoot else { throw MediaError.io("the answer is not XML (no element)") }
        }
    }

    /// The namespace of `getctag`.
    package static let calendarServer = "http://calendarserver.org/ns/"

    /// The DAV: elements that carry meaning here (and calendarserver.org's
    /// `getctag`); any other is `other`.
    enum Element: String {
        case multistatus, response, href, status, propstat, prop, resourcetype, collection
        case getcontentlength, getlastmodified, getetag, getcontenttype, getctag
        case other

        init(name: String, namespace: String?) {
            switch namespace {
            case "DAV:": self = Element(rawValue: name).map { $0 == .getctag ? .other : $0 } ?? .other
            case PropfindReader.calendarServer?: self = name == "getctag" ? .getctag : .other
            default: self = .other
            }
        }

        /// Whether its text is a value to collect.
        var holdsValue: Bool {
            switch self {
            case .href, .status, .getcontentlength, .getlastmodified, .getetag, .getcontenttype, .getctag: return true
            default: return false
            }
        }
    }

    /// The parser's delegate: a stack of the open elements, the response and
    /// the propstat being read, and the text of the value being read.
    final class Reader: NSObject, XMLParserDelegate {
        private let each: (Response) -> Void
        private(set) var sawRoot = false
        /// The root element's name when it is not DAV: multistatus.
        private(set) var wrongRoot: String?
        private var stack: [Element] = []
        private var response: Response?
        /// The properties of the open propstat, kept only if its status is 2xx.
        private var pending = Response()
        private var pendingStatus: String?
        private var text = ""
        private var textTooLong = false

        init(each: @escaping (Response) -> Void) {
            self.each = each
        }

        func parser(_ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?,
                    qualifiedName: String?, attributes: [String: String] = [:]) {
            let element = Element(name: elementName, namespace: namespaceURI)
            if !sawRoot {
                sawRoot = true
                guard element == .multistatus else {
                    wrongRoot = qualifiedName ?? elementName
                    parser.abortParsing()
                    return
                }
            }
            let parent = stack.last
            // An element counts only where RFC 4918 puts it: an href inside
            // some property (a lock's owner) is not the response's.
            let placed: Element
            switch (parent, element) {
            case (.multistatus?, .response):
                response = Response()
                placed = element
            case (.response?, .href), (.response?, .status), (.response?, .propstat):
                placed = response == nil ? .other : element
                if placed == .propstat {
                    pending = Response()
                    pendingStatus = nil
                }
            case (.propstat?, .prop), (.propstat?, .status):
                placed = element
            case (.prop?, .resourcetype), (.prop?, .getcontentlength), (.prop?, .getlastmodified),
                 (.prop?, .getetag), (.prop?, .getcontenttype), (.prop?, .getctag):
                placed = element
            case (.resourcetype?, .collection):
                pending.isCollection = true
                placed = element
            case (nil, .multistatus):
                placed = element
            default:
                placed = .other
            }
            stack.append(placed)
            if placed.holdsValue {
                text = ""
                textTooLong = false
            }
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) {
            collect(string)
        }

        func parser(_ parser: XMLParser, foundCDATA CDATABlock: Data) {
            collect(String(decoding: CDATABlock, as: UTF8.self))
        }

        private func collect(_ string: String) {
            guard let top = stack.last, top.holdsValue, !textTooLong else { return }
            if text.utf8.count + string.utf8.count > maxValueBytes {
                textTooLong = true
                text = ""
            } else {
                text += string
            }
        }

        func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?,
                    qualifiedName: String?) {
            guard let element = stack.popLast() else { return }
            let parent = stack.last
            // Only values are trimmed: Foundation's trimming was a fifth of a listing's time.
            let value = element.holdsValue ? String(text.trimmingSpaces) : ""
            if element.holdsValue && textTooLong {
                response?.defect = "a <\(element.rawValue)> longer than \(maxValueBytes >> 10) KiB"
            }
            switch (parent, element) {
            case (.response?, .href):
                response?.href = value
            case (.response?, .status):
                if !Self.isSuccess(value) { response?.defect = "status '\(value.prefix(80))'" }
            case (.propstat?, .status):
                pendingStatus = value
            case (_, .getcontentlength): pending.contentLength = value
            case (_, .getlastmodified): pending.lastModified = value
            case (_, .getetag): pending.etag = value
            case (_, .getcontenttype): pending.contentType = value
            case (_, .getctag): pending.ctag = value
            case (_, .propstat):
                // A propstat without a status is taken as found (lenient servers).
                if pendingStatus.map(Self.isSuccess) ?? true { merge(pending) }
            case (_, .response):
                if let response { each(response) }
                response = nil
            default:
                break
            }
            if element.holdsValue { text = "" }
        }

        private func merge(_ found: Response) {
            guard response != nil else { return }
            if found.isCollection { response?.isCollection = true }
            if let value = found.contentLength { response?.contentLength = value }
            if let value = found.lastModified { response?.lastModified = value }
            if let value = found.etag { response?.etag = value }
            if let value = found.contentType { response?.contentType = value }
            if let value = found.ctag { response?.ctag = value }
        }

        /// `HTTP/1.1 200 OK` and the like: a 2xx status line.
        static func isSuccess(_ statusLine: String) -> Bool {
            let fields = statusLine.split(separator: " ", maxSplits: 2)
            guard fields.count >= 2, let code = Int(fields[1]) else { return false }
            return (200..<300).contains(code)
        }
    }
}
