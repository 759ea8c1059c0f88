// The INI files every AWS tool reads, ~/.aws/credentials and ~/.aws/config,
// read as botocore's configparser reads them: `[section]` headers, `key =
// value` (or `key: value`) lines with keys lower-cased, whole-line `#` and
// `;` comments (none inline), and indented `key = value` lines after a `key
// =` with no value as that key's sub-section (`s3 =` then `  endpoint_url =
// ...`), kept as "s3.endpoint_url". Parsing only: what a value means is
// S3Credentials' business. Errors name the file and line, never its text
// (the credentials file holds secrets).
import Foundation
import MediaSupport

package struct AWSConfigFile: Sendable, Equatable {
    /// A file larger than this is not a credentials or config file.
    package static let maxBytes = 1 << 20

    /// Section name (as written: `default`, `profile work`) → key → value.
    package var sections: [String: [String: String]] = [:]

    package init(text: String, path: String) throws {
        var section: String?
        var key: String?
        var parent: String?
        for (index, raw) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            let bad = { (why: String) in MediaError(EINVAL, "\(path):\(index + 1): \(why)") }
            let line = raw.trimmingSpaces
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            let indented = raw.first == " " || raw.first == "\t"
            if line.hasPrefix("[") && !indented {
                guard line.hasSuffix("]"), line.count > 2 else { throw bad("a section header is '[name]'") }
                let name = String(line.dropFirst().dropLast().trimmingSpaces)
                section = name
                key = nil
                parent = nil
                if sections[name] == nil { sections[name] = [:] }
                continue
            }
            guard let current = section else { throw bad("a setting before the first [section]") }
            if indented, let owner = key {
                if let parent, let setting = Self.setting(line) {
                    sections[current]?["\(parent).\(setting.name)"] = setting.value
                } else {
                    sections[current]?[owner, default: ""] += "\n" + line
                }
                continue
            }
            guard let setting = Self.setting(line) else { throw bad("expected 'key = value'") }
            sections[current]?[setting.name] = setting.value
            key = setting.name
            parent = setting.value.isEmpty ? setting.name : nil
        }
    }

    /// Reads the file at `path`; nil when there is none.
    package static func load(path: String) throws -> AWSConfigFile? {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            if access(path, F_OK) != 0 && errno == ENOENT { return nil }
            throw MediaError.system("\(path) cannot be read")
        }
        defer { try? handle.close() }
        let data = (try? handle.read(upToCount: maxBytes + 1)) ?? Data()
        guard data.count <= maxBytes else { throw MediaError(EFBIG, "\(path) is larger than \(maxBytes >> 20) MiB") }
        guard let text = String(data: data, encoding: .utf8) else { throw MediaError(EINVAL, "\(path) is not UTF-8") }
        return try AWSConfigFile(text: text, path: path)
    }

    /// The settings of a profile: `[name]` in the credentials file; in the
    /// config file `[profile name]`, or `[default]` for the default one.
    package func profile(_ name: String, isConfig: Bool) -> [String: String]? {
        guard isConfig else { return sections[name] }
        return sections["profile \(name)"] ?? (name == "default" ? sections["default"] : nil)
    }

    /// `key = value` or `key: value`, split at the first of either; the key
    /// lower-cased, both trimmed. nil: no separator or no key.
    private static func setting(_ line: Substring) -> (name: String, value: String)? {
        guard let separator = line.firstIndex(where: { $0 == "=" || $0 == ":" }) else { return nil }
        let name = line[..<separator].trimmingSpaces.lowercased()
        guard !name.isEmpty else { return nil }
        return (name, String(line[line.index(after: separator)...].trimmingSpaces))
    }
}
