// Why an archive, or one member of it, cannot be served as ranges of its
// volumes. Thrown for the whole archive (encrypted headers, volumes that
// disagree), attached to a member otherwise. Malformed bytes are not a
// refusal: they throw a MediaError naming the field.
import Glibc
import Foundation
import MediaSupport
import MediaStore
import MediaNetwork

package enum ArchiveRefusal: Error, Equatable, Sendable, CustomStringConvertible {
    /// Packed with a method other than store; the method's number.
    case compressed(method: Int)
    /// Packed in a solid stream: its bytes depend on the members before it.
    case solid
    /// The headers themselves are encrypted: nothing can be listed.
    case encryptedHeaders
    case encryptedData
    /// A symbolic or hard link, a file copy or other redirection record.
    case link
    /// The archive does not give the member's size.
    case unknownSize
    /// A volume with this number (0 = first) was not given.
    case missingVolume(Int)
    /// The volumes' headers contradict one another; what contradicts.
    case volumesDisagree(String)
    /// A path with "..", an empty component, an absolute path or a NUL.
    case unsafePath(String)
    /// A second member with a path already listed.
    case duplicatePath(String)

    /// What a reader of the member would see.
    package var errno: Int32 { self == .encryptedHeaders || self == .encryptedData ? EACCES : EOPNOTSUPP }

    package var description: String {
        switch self {
        case .compressed(let method): return "compressed (method \(method)), not stored"
        case .solid: return "in a solid stream"
        case .encryptedHeaders: return "headers are encrypted"
        case .encryptedData: return "data is encrypted"
        case .link: return "a link or redirection, not a file"
        case .unknownSize: return "size unknown"
        case .missingVolume(let number): return "volume \(number) is missing"
        case .volumesDisagree(let what): return "volumes disagree: \(what)"
        case .unsafePath(let path): return "unsafe path '\(path.prefix(200))'"
        case .duplicatePath(let path): return "'\(path.prefix(200))' is listed twice"
        }
    }
}
