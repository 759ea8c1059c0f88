// What a relisting did to one directory's names, for the kernel: it may
// hold an added name as missing (a negative entry, `negative_timeout`), and
// a removed or changed one with its old entry and attributes. The MediaFS
// layer tells it of exactly these (decision 0051). A pure value: the diff
// of two name tables, computed under the catalog's lock by the relisting
// that replaces them (CatalogState.relist), and nothing else.

public struct NameChanges: Sendable, Equatable {
    /// The directory's path in the mount, "" for the root.
    public let directory: String
    /// Names the directory did not have.
    public var added: [String] = []
    /// Names it no longer has.
    public var removed: [String] = []
    /// Names it keeps that lead elsewhere now (another URL, a file become
    /// a directory), or whose file's attributes changed without a loader
    /// to tell the kernel (CatalogState.listedChange).
    public var changed: [String] = []

    public init(directory: String, added: [String] = [], removed: [String] = [], changed: [String] = []) {
        self.directory = directory
        self.added = added
        self.removed = removed
        self.changed = changed
    }

    public var isEmpty: Bool { added.isEmpty && removed.isEmpty && changed.isEmpty }

    /// How many names the kernel is told of.
    public var count: Int { added.count + removed.count + changed.count }

    /// The names of `new` against those of `old`, each list sorted; `same`
    /// says whether a name kept leads to the same thing. One pass over each
    /// table: a listing of 100,000 names is diffed on every refresh.
    static func between<Value>(_ old: [String: Value], _ new: [String: Value], in directory: String,
                               same: (Value, Value) -> Bool) -> NameChanges {
        var changes = NameChanges(directory: directory)
        for (name, value) in new {
            if let before = old[name] {
                if !same(before, value) { changes.changed.append(name) }
            } else {
                changes.added.append(name)
            }
        }
        for name in old.keys where new[name] == nil { changes.removed.append(name) }
        changes.added.sort()
        changes.removed.sort()
        changes.changed.sort()
        return changes
    }
}
