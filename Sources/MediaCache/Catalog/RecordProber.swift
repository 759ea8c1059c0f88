// What probes a listing's entries in the background: the feeder that keeps
// a bounded number of their probes running, and the worker their answers
// are taken on, off the network thread (taking them needs the catalog's
// lock). The probes themselves are Catalog+RecordProbes.
final class RecordProber: Sendable {
    /// A listing's background probes, a bounded number at a time.
    let feeder = ProbeFeeder()
    /// Record probes' answers, off the network thread (they take `state`).
    let answers = Worker(name: "mediafs-probes")

    func stop() {
        feeder.stop()
        answers.stop(drain: false)
    }
}
