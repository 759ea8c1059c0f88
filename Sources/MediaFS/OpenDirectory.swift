// What an open directory handle carries between readdir calls: the listing
// taken when reading began, so each call resumes at its offset in O(1)
// instead of listing the directory again. Passed as fuse_file_info.fh.
import MediaCache

final class OpenDirectory: FileHandleBox {
    /// Taken at offset 0 (the first call, and a rewinddir).
    var entries: [Catalog.Entry] = []
}
