// A fresh directory under /tmp for one test; the test removes it.
import Foundation
import MediaNetwork
import MediaSupport
#if canImport(Glibc)
import Glibc
#endif

enum TemporaryDirectory {
    static func make(_ name: String) throws -> String {
        var template = Array("/tmp/mediafs-\(name)-test.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw MediaError.system("mkdtemp") }
        return String(cString: made)
    }
}
