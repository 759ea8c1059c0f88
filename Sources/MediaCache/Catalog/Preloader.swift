// What opening a file preloads of the files after it, in source order
// (`--preload-next`), on a worker of its own, off the opener's thread.
final class Preloader: Sendable {
    let next: Catalog.PreloadNext?
    let worker = Worker(name: "mediafs-preload")

    init(next: Catalog.PreloadNext?) {
        self.next = next
    }
}
