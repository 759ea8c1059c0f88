// What opening a file preloads of the files after it, in source order
// (`--preload-next`): the leading bytes of the next files in its directory,
// as a feed does so the next item starts at once, on a worker of its own,
// off the opener's thread.
//
// Shares the catalog's `state`, taken only to find the files after it.
import Foundation
import MediaSupport

final class Preloader: Sendable {
    let next: Catalog.PreloadNext?
    let worker = Worker(name: "mediafs-preload")
    /// The catalog's tree, loaders and records.
    private let state: Locked<CatalogState>

    init(next: Catalog.PreloadNext?, state: Locked<CatalogState>) {
        self.next = next
        self.state = state
    }

    /// `name` in `parent` was opened: the next files after it are
    /// preloaded, up to the count and bytes `--preload-next` says.
    func opened(_ name: String, in parent: CatalogState.Directory) {
        guard let preloadNext = next else { return }
        let next: [FileLoader] = state.withLock { state in
            var following: [FileLoader] = []
            let order = state.names(of: parent)
            guard let index = order.firstIndex(of: name) else { return [] }
            for sibling in order[(index + 1)...] where following.count < preloadNext.count {
                if case .file(let url)? = state.child(sibling, of: parent),
                   let loader = state.liveLoader(url: url, path: parent.path + "/" + sibling) {
                    following.append(loader)
                }
            }
            return following
        }
        guard !next.isEmpty else { return }
        worker.submit {
            for loader in next {
                do {
                    try loader.preload(limit: preloadNext.bytes)
                } catch {
                    Log.warning("preload of \(loader.source.displayURL): \(error)")
                }
            }
        }
    }

    func stop() {
        worker.stop(drain: false)
    }
}
