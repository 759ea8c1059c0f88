// Pinning a file: its cached bytes are never evicted or trimmed (evict() and
// trim() refuse; a purge still frees them), yet count against the limits.
// The pin is part of the entry's metadata, so it outlives the mount.
import Foundation
import MediaSupport

extension FileLoader {
    public var isPinned: Bool {
        lock.withLock { $0.use.pinned }
    }

    /// Pins or unpins the file, and saves the pin at once: a crash right
    /// after `mediafs pin` must not let the next mount evict the file. A file
    /// with no cache entry yet keeps the pin in memory until its first save.
    public func setPinned(_ on: Bool) {
        let changed = lock.withLock { $0.pin(on) }
        guard changed else { return }
        flush()
        Log.info("\(on ? "pinned" : "unpinned") \(source.displayURL)")
    }
}
