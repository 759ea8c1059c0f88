// rclone's remote-control protocol, the part that the programs that put
// media on servers call (decision 0048): the usenet and debrid gateways
// call `vfs/forget` on every add and remove and `core/version` to see the
// mount is there; autoscan-style tools call `vfs/refresh`. Each command is
// a POST of /COMMAND with parameters in the query, a JSON object or a form
// body; answers are JSON objects, errors rclone's shape
// (`{"error", "input", "path", "status"}`). Paths are relative to the
// mount's root. A forget or a refresh lists its directories again now,
// believing what they say (as the user's `user.mediafs.refresh` does), and
// answers once they are listed.
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import MediaSupport

public struct RemoteControl: Sendable {
    /// Who may call it.
    public let auth: RemoteControlAuth
    /// Shown by `vfs/list` and `vfs/stats`: the mount's path.
    public let mountpoint: String

    public init(auth: RemoteControlAuth, mountpoint: String) {
        self.auth = auth
        self.mountpoint = mountpoint
    }

    /// Directories one recursive refresh lists at most.
    static let maxRecursive = 10_000
    /// The largest request body read.
    public static let maxBody = 64 << 10

    struct Failure: Error {
        var status: UInt32
        var message: String
    }

    /// The parameters of a request: the query's, then a JSON object's or a
    /// form's from the body (rclone's client sends JSON), later ones winning.
    static func parameters(query: [(String, String)], body: [UInt8], contentType: String?) throws -> [String: Any] {
        var parameters: [String: Any] = [:]
        for (key, value) in query { parameters[key] = value }
        guard !body.isEmpty else { return parameters }
        let type = contentType?.lowercased() ?? ""
        if type.hasPrefix("application/x-www-form-urlencoded") {
            var components = URLComponents()
            components.percentEncodedQuery = String(decoding: body, as: UTF8.self).replacingOccurrences(of: "+", with: "%20")
            for item in components.queryItems ?? [] { parameters[item.name] = item.value ?? "" }
            return parameters
        }
        guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else {
            throw Failure(status: 400, message: "the body is not a JSON object")
        }
        parameters.merge(object) { _, new in new }
        return parameters
    }

    /// A parameter as text (rclone's client sends strings; JSON may carry
    /// numbers and booleans).
    static func text(_ value: Any?) -> String? {
        switch value {
        case let text as String: return text
        case let number as NSNumber: return number.stringValue
        default: return nil
        }
    }

    static func flag(_ value: Any?) throws -> Bool {
        switch value {
        case nil: return false
        case let flag as Bool: return flag
        case let text as String:
            switch text.lowercased() {
            case "true", "1", "yes": return true
            case "false", "0", "no", "": return false
            default: throw Failure(status: 400, message: "'\(text)' is not true or false")
            }
        default: throw Failure(status: 400, message: "a flag must be true or false")
        }
    }

    /// A path relative to the mount's root, as the catalog names it; throws
    /// for one that climbs out.
    static func path(_ text: String) throws -> String {
        let parts = text.split(separator: "/").filter { $0 != "." }
        guard !parts.contains("..") else { throw Failure(status: 400, message: "\(text): a path outside the mount") }
        return parts.joined(separator: "/")
    }

    /// A JSON answer's bytes, keys sorted, a newline after (as rclone's).
    static func encoded(_ json: [String: Any]) -> [UInt8] {
        let data = (try? JSONSerialization.data(withJSONObject: json, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return Array(data) + [0x0A]
    }

    /// The answer to `command` with `parameters`.
    func answer(command: String, parameters: [String: Any], catalog: Catalog) -> (status: UInt32, json: [String: Any]) {
        do {
            return (200, try run(command, parameters, catalog))
        } catch let failure as Failure {
            return (failure.status, ["error": failure.message, "input": parameters, "path": command,
                                     "status": Int(failure.status)])
        } catch {
            let message = (error as? MediaError)?.message ?? "\(error)"
            return (500, ["error": message, "input": parameters, "path": command, "status": 500])
        }
    }

    private func run(_ command: String, _ parameters: [String: Any], _ catalog: Catalog) throws -> [String: Any] {
        switch command {
        case "core/version":
            let numbers = MediaCacheVersion.string.split(separator: ".").compactMap { Int($0) }
            return ["version": "mediafs \(MediaCacheVersion.string)", "decomposed": numbers, "isGit": false,
                    "isBeta": false, "os": "linux", "arch": Self.architecture, "goVersion": "none",
                    "linking": "dynamic", "goTags": "none"]
        case "core/pid":
            return ["pid": Int(getpid())]
        case "rc/noop":
            return parameters
        case "vfs/list":
            return ["vfses": [mountpoint]]
        case "vfs/stats":
            return try stats(catalog)
        case "vfs/refresh":
            return try refresh(parameters, catalog)
        case "vfs/forget":
            return try forget(parameters, catalog)
        default:
            throw Failure(status: 404, message: "couldn't find method \"\(command)\"")
        }
    }

    #if arch(x86_64)
    static let architecture = "amd64"
    #elseif arch(arm64)
    static let architecture = "arm64"
    #else
    static let architecture = "unknown"
    #endif

    /// `vfs/refresh [dir=PATH…] [recursive=true]`: lists each directory (the
    /// root without one) again now; the answer says, per directory, "OK" or
    /// why not.
    private func refresh(_ parameters: [String: Any], _ catalog: Catalog) throws -> [String: Any] {
        let recursive = try Self.flag(parameters["recursive"])
        var asked: [String] = []
        for (key, value) in parameters where key.hasPrefix("dir") {
            guard let text = Self.text(value) else { throw Failure(status: 400, message: "\(key) is not a path") }
            asked.append(text)
        }
        if asked.isEmpty { asked = [""] }
        var result: [String: String] = [:]
        for text in asked.sorted() {
            do {
                let path = try Self.path(text)
                try catalog.refresh("/" + path)
                if recursive { try refreshBelow(path, catalog) }
                result[text] = "OK"
            } catch let failure as Failure {
                result[text] = failure.message
            } catch {
                result[text] = (error as? MediaError)?.message ?? "\(error)"
            }
        }
        catalog.waitUntilKernelTold()
        return ["result": result]
    }

    /// The listed directories below `path`, each listed again, breadth first.
    private func refreshBelow(_ path: String, _ catalog: Catalog) throws {
        var queue = [path]
        var listed = 0
        while let directory = queue.first {
            queue.removeFirst()
            for name in try catalog.subdirectories(of: "/" + directory) {
                let child = directory.isEmpty ? name : directory + "/" + name
                listed += 1
                guard listed <= Self.maxRecursive else {
                    throw Failure(status: 500, message: "more than \(Self.maxRecursive) directories below \(path)")
                }
                // A folder of an archive's members is not listed: nothing to refresh.
                if (try? catalog.refresh("/" + child)) != nil { queue.append(child) }
            }
        }
    }

    /// `vfs/forget [file=PATH…] [dir=PATH…]`: the directories named, and
    /// those that hold the files named, are listed again now (the root
    /// without any path), so a file the server added or removed shows at
    /// once. Answers with the paths forgotten; a path whose directory is
    /// not in the mount fails the whole call before anything is listed.
    private func forget(_ parameters: [String: Any], _ catalog: Catalog) throws -> [String: Any] {
        var forgotten: [String] = []
        var directories = Set<String>()
        for (key, value) in parameters.sorted(by: { $0.key < $1.key }) {
            let isFile = key.hasPrefix("file")
            guard isFile || key.hasPrefix("dir") else { continue }
            guard let text = Self.text(value) else { throw Failure(status: 400, message: "\(key) is not a path") }
            let path = try Self.path(text)
            var parts = path.split(separator: "/").map(String.init)
            if isFile {
                guard !parts.isEmpty else { throw Failure(status: 400, message: "\(key) names no file") }
                parts.removeLast()
            }
            let directory = parts.joined(separator: "/")
            guard (try? catalog.subdirectories(of: "/" + directory)) != nil else {
                throw Failure(status: 404, message: "\(text): no such directory in the mount")
            }
            directories.insert(directory)
            forgotten.append(text)
        }
        if directories.isEmpty { directories = [""] }
        for directory in directories.sorted() {
            do {
                try catalog.refresh("/" + directory)
            } catch let error as MediaError where error.errno == EINVAL {
                // A root of sources, an archive's folder: no listing to forget.
            }
        }
        catalog.waitUntilKernelTold()
        return ["forgotten": forgotten]
    }

    /// `vfs/stats`: rclone's shape, from the mount's own figures.
    private func stats(_ catalog: Catalog) throws -> [String: Any] {
        let stats = (try? JSONSerialization.jsonObject(with: Data(catalog.statsJSON().utf8)) as? [String: Any]) ?? [:]
        let number = { (key: String) -> Int64 in (stats[key] as? NSNumber)?.int64Value ?? 0 }
        return ["fs": mountpoint, "inUse": number("open_handles"),
                "diskCache": ["bytesUsed": number("cached_bytes"), "files": number("entries"),
                              "outOfSpace": stats["cache_no_room"] as? Bool ?? false,
                              "uploadsInProgress": 0, "uploadsQueued": 0, "erroredFiles": 0] as [String: Any],
                "opt": ["CacheMode": "full", "ReadOnly": true] as [String: Any]]
    }
}
