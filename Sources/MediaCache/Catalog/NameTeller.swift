// How the catalog has the kernel told of names (decision 0051). The FUSE
// layer owns the kernel's session; the catalog knows when names change.
// Two needs, two calls: a relisting or a root edit queues its news and goes
// on (it may run inside a FUSE request whose directory lock the kernel's
// invalidation needs), and the remote control, which answers no FUSE
// request, waits until that news is out, so the next stat after its answer
// sees the new state.

public struct NameTeller: Sendable {
    /// Queues the news of one directory's names; never waits.
    public let tell: @Sendable (NameChanges) -> Void
    /// Returns once every news queued before the call reached the kernel
    /// (bounded). Never from inside a FUSE request.
    public let waitUntilTold: @Sendable () -> Void

    public init(tell: @escaping @Sendable (NameChanges) -> Void, waitUntilTold: @escaping @Sendable () -> Void) {
        self.tell = tell
        self.waitUntilTold = waitUntilTold
    }
}
