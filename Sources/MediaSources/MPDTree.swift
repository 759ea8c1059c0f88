// A DASH MPD's XML as a small tree of elements, read with FoundationXML's
// XMLParser (namespace-aware: elements of any namespace by their local
// name), keeping only the elements DASHManifest reads and their attributes
// and text. Bounded: at most `maxElements` elements kept, `maxDepth` deep,
// each text at most `maxTextBytes`; past them the MPD is refused.
import Foundation
import MediaSupport
#if canImport(FoundationXML)
import FoundationXML
import MediaStore
import MediaNetwork
#endif

public final class MPDTree: @unchecked Sendable {
    public static let maxElements = 500_000
    public static let maxDepth = 32
    public static let maxTextBytes = 4 << 10
    /// The elements read; any other (with what it holds) is skipped.
    static let kept: Set<String> = ["MPD", "Period", "AdaptationSet", "Representation", "BaseURL", "SegmentTemplate",
                                    "SegmentTimeline", "S", "SegmentList", "SegmentURL", "Initialization", "SegmentBase",
                                    "ContentProtection"]

    public let name: String
    public let attributes: [String: String]
    public private(set) var children: [MPDTree] = []
    public private(set) var text = ""

    init(name: String, attributes: [String: String]) {
        self.name = name
        self.attributes = attributes
    }

    public func all(_ name: String) -> [MPDTree] { children.filter { $0.name == name } }
    public func first(_ name: String) -> MPDTree? { children.first { $0.name == name } }

    /// The root <MPD>; a MediaError (EINVAL) naming `origin` when the XML is
    /// not well formed, not an MPD, or past the bounds.
    public static func parse(_ xml: Data, origin: String) throws -> MPDTree {
        let builder = Builder()
        let parser = XMLParser(data: xml)
        parser.shouldProcessNamespaces = true
        parser.shouldResolveExternalEntities = false
        parser.delegate = builder
        let parsed = parser.parse()
        if let problem = builder.problem { throw MediaError(EINVAL, "\(origin): \(problem)") }
        guard parsed, parser.parserError == nil else {
            let why = parser.parserError.map { "\($0.localizedDescription)" } ?? "unknown error"
            throw MediaError(EINVAL, "\(origin): not well-formed XML (line \(parser.lineNumber): \(why))")
        }
        guard let root = builder.root, root.name == "MPD" else {
            throw MediaError(EINVAL, "\(origin): not a DASH MPD (its XML starts with <\(builder.root?.name ?? "nothing")>)")
        }
        return root
    }

    private final class Builder: NSObject, XMLParserDelegate {
        var root: MPDTree?
        var problem: String?
        private var stack: [MPDTree] = []
        /// Depth inside an element that is not kept (0: not inside one).
        private var skipping = 0
        private var count = 0

        func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
                    attributes: [String: String] = [:]) {
            if skipping > 0 || !MPDTree.kept.contains(name) || (root != nil && stack.isEmpty) {
                skipping += 1
                return
            }
            count += 1
            guard count <= MPDTree.maxElements, stack.count < MPDTree.maxDepth else {
                problem = "more than \(MPDTree.maxElements) elements or \(MPDTree.maxDepth) levels"
                return parser.abortParsing()
            }
            let node = MPDTree(name: name, attributes: attributes)
            if let parent = stack.last { parent.children.append(node) } else { root = node }
            stack.append(node)
        }

        func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
            if skipping > 0 { skipping -= 1 } else { stack.removeLast() }
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) {
            guard skipping == 0, let node = stack.last else { return }
            guard node.text.utf8.count + string.utf8.count <= MPDTree.maxTextBytes else {
                problem = "a text longer than \(MPDTree.maxTextBytes) bytes in <\(node.name)>"
                return parser.abortParsing()
            }
            node.text += string
        }
    }
}
