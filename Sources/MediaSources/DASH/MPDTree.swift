// A DASH MPD's XML as a small tree of elements, read with FoundationXML's
// XMLParser (namespace-aware: elements of any namespace by their local
// name), keeping only the elements DASHManifest reads and their attributes
// and text. Bounded: at most `maxElements` elements kept, `maxDepth` deep,
// each text at most `maxTextBytes`; past them the MPD is refused.
import Foundation
import MediaSupport
#if canImport(FoundationXML)
import FoundationXML
#endif
import MediaStore
import MediaNetwork

package final class MPDTree: Sendable {
    package static let maxElements = 500_000
    package static let maxDepth = 32
    package static let maxTextBytes = 4 << 10
    /// The elements read; any other (with what it holds) is skipped.
    static let kept: Set<String> = ["MPD", "Period", "AdaptationSet", "Representation", "BaseURL", "SegmentTemplate",
                                    "SegmentTimeline", "S", "SegmentList", "SegmentURL", "Initialization", "SegmentBase",
                                    "ContentProtection"]

    package let name: String
    package let attributes: [String: String]
    package let children: [MPDTree]
    package let text: String

    init(name: String, attributes: [String: String], children: [MPDTree] = [], text: String = "") {
        self.name = name
        self.attributes = attributes
        self.children = children
        self.text = text
    }

    package func all(_ name: String) -> [MPDTree] { children.filter { $0.name == name } }
    package func first(_ name: String) -> MPDTree? { children.first { $0.name == name } }

    /// The root <MPD>; a MediaError (EINVAL) naming `origin` when the XML is
    /// not well formed, not an MPD, or past the bounds.
    package static func parse(_ xml: Data, origin: String) throws -> MPDTree {
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

    /// Builds the tree bottom up: an element becomes its immutable node
    /// when it ends, with its children made before it.
    private final class Builder: NSObject, XMLParserDelegate {
        var root: MPDTree?
        var problem: String?
        private struct Open {
            let name: String
            let attributes: [String: String]
            var children: [MPDTree] = []
            var text = ""
        }
        private var stack: [Open] = []
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
            stack.append(Open(name: name, attributes: attributes))
        }

        func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
            if skipping > 0 {
                skipping -= 1
                return
            }
            let open = stack.removeLast()
            let node = MPDTree(name: open.name, attributes: open.attributes, children: open.children, text: open.text)
            if stack.isEmpty { root = node } else { stack[stack.count - 1].children.append(node) }
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) {
            guard skipping == 0, !stack.isEmpty else { return }
            guard stack[stack.count - 1].text.utf8.count + string.utf8.count <= MPDTree.maxTextBytes else {
                problem = "a text longer than \(MPDTree.maxTextBytes) bytes in <\(stack[stack.count - 1].name)>"
                return parser.abortParsing()
            }
            stack[stack.count - 1].text += string
        }
    }
}
