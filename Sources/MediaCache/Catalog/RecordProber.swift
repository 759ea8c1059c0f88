// Probes of listed entries that have no loader: a listing's background
// probes (fed by the ProbeFeeder, a bounded number at a time) and the stats
// that overtake them. Their answers go into the entries' records and the
// unsaved answers, so a scan that stats every file of a listing makes no
// loader. Answers are taken on a worker of its own, off the network thread
// (taking them needs the catalog's lock), unless the lock is free at once.
//
// Shares the catalog's `state`; never waits for it on the network thread.
import Foundation
import MediaNetwork
import MediaSources
import MediaStore
import MediaSupport

final class RecordProber: Sendable {
    /// A listing's background probes, a bounded number at a time.
    let feeder = ProbeFeeder()
    /// Record probes' answers, off the network thread (they take `state`).
    let answers = Worker(name: "mediafs-probes")
    /// The catalog's tree, loaders and records.
    private let state: Locked<CatalogState>
    /// What the probes are sent through.
    private let fetcher: Fetching
    private let settings: LoaderSettings
    /// Has the flusher save a batch of answers now (CatalogMaintenance).
    private let wakeFlusher: @Sendable () -> Void

    init(state: Locked<CatalogState>, fetcher: Fetching, settings: LoaderSettings,
         wakeFlusher: @escaping @Sendable () -> Void) {
        self.state = state
        self.fetcher = fetcher
        self.settings = settings
        self.wakeFlusher = wakeFlusher
        feeder.starting(with: { [weak self] url, settled in self?.probeListed(url, then: settled) ?? false },
                        withoutWaiting: { [weak self] url, settled -> Bool? in
                            // Not `self?.… ?? false`: that would read a taken lock (nil) as "skip".
                            guard let self else { return false }
                            return self.probeListed(url, waiting: false, then: settled)
                        },
                        whenDrained: wakeFlusher)
    }

    func stop() {
        feeder.stop()
        answers.stop(drain: false)
    }

    /// Has the entries a listing showed without a size probed, in order.
    func add(_ urls: [String]) {
        feeder.add(urls)
    }

    /// The feeder's start: probes a listed entry in the background, through
    /// its loader if it has one, else into its record, unless its size is
    /// known or a probe of it runs. Returns whether `settled` will be called.
    func probeListed(_ url: String, then settled: @escaping @Sendable () -> Void) -> Bool {
        probeListed(url, waiting: true, then: settled)!
    }

    /// The same, but nil at once when `waiting` is false and the catalog's
    /// lock is taken: the network thread starts the next probe when it
    /// records an answer, and must not wait for the lock.
    func probeListed(_ url: String, waiting: Bool, then settled: @escaping @Sendable () -> Void) -> Bool? {
        enum Start { case loader(FileLoader), record(RecordProbe), none }
        let choose = { (state: inout CatalogState) -> Start in
            if let loader = state.loaders[url] { return .loader(loader) }
            // One running already is left to run: this start is the feeder's.
            guard let (probe, isNew) = state.beginRecordProbe(of: url, clock: self.settings.clock), isNew else {
                return .none
            }
            return .record(probe)
        }
        let chosen: Start? = waiting ? state.withLock(choose) : state.withLockIfAvailable(choose)
        guard let start = chosen else { return nil }
        switch start {
        case .loader(let loader):
            // Settled on the network thread: the next start, which takes
            // the catalog's lock, runs on the probes' worker instead.
            let answers = self.answers
            return loader.prefetchInfo(then: { if !answers.submit(settled) { settled() } })
        case .record(let probe):
            startRecordProbe(probe, url: url, priority: .probe, fromFeeder: true, then: settled)
            return true
        case .none:
            return false
        }
    }

    /// Sends a record probe's request; call without the lock. Its answer
    /// comes on the network thread, which must not wait for the catalog's
    /// lock (a listing or a flush may hold it for a while): a success is
    /// recorded there when the lock is free, and the feeder's next probes
    /// (`fromFeeder`) start there the same way; anything else goes to the
    /// probes' worker, which then starts the feeder's next probe. (Handing
    /// every answer to the worker cost two thread switches per probe.)
    func startRecordProbe(_ probe: RecordProbe, url: String, priority: FetchRequest.Priority,
                          fromFeeder: Bool = false, then settled: (@Sendable () -> Void)? = nil) {
        let (answers, feeder) = (self.answers, self.feeder)
        probe.started(ContentProbe.start(url: url, fetcher: fetcher, clock: settings.clock, priority: priority) { [weak self] result in
            if let self, self.recordProbeFinishedWithoutWaiting(probe, url: url, result) {
                probe.finish(result)
                guard let settled else { return }
                if !fromFeeder {
                    settled()
                } else if !feeder.settledWithoutWaiting() {
                    // A start found the lock taken: the worker goes on.
                    answers.submit { feeder.pump() }
                }
                return
            }
            let answer: @Sendable () -> Void = { [weak self] in
                self?.recordProbeFinished(probe, url: url, result)
                probe.finish(result)
                settled?()
            }
            // Stopping: the answer is given here, as the mount ends.
            if !answers.submit(answer) { probe.finish(result) }
        })
    }

    /// A successful record probe's answer recorded without waiting: false
    /// (and nothing done) when the lock is taken, the probe failed, or a
    /// loader was made meanwhile, for `recordProbeFinished` to handle.
    private func recordProbeFinishedWithoutWaiting(_ probe: RecordProbe, url: String,
                                                   _ result: Result<ContentInfo, MediaError>) -> Bool {
        guard case .success(let info) = result else { return false }
        let now = settings.clock.wall()
        let done = state.withLockIfAvailable { state -> (recorded: Bool, wakeFlusher: Bool) in
            guard state.loaders[url] == nil else { return (false, false) }
            return (true, state.recordProbeAnswered(probe, of: url, with: info, at: now).batchFull)
        }
        guard let done, done.recorded else { return false }
        // A batch waits: saving starts now, not at the next flush.
        if done.wakeFlusher { wakeFlusher() }
        return true
    }

    /// A record probe's answer goes into the record, its metadata among the
    /// unsaved; a loader made meanwhile is offered it instead. A failure is
    /// kept for the next stat to hand to a loader (`awaitRecordProbe`),
    /// whose backoff then governs the next probe.
    private func recordProbeFinished(_ probe: RecordProbe, url: String, _ result: Result<ContentInfo, MediaError>) {
        let now = settings.clock.wall()
        let (offerTo, wakeFlusher) = state.withLock { state -> (FileLoader?, Bool) in
            // A failure stays, so that the next stat answers it at once.
            guard case .success(let info) = result else { return (nil, false) }
            let answered = state.recordProbeAnswered(probe, of: url, with: info, at: now)
            return (answered.loader, answered.batchFull)
        }
        if case .failure(let error) = result { Log.warning("\(MediaError.redacted(url)): \(error.message)") }
        // A failure waits in `probing` for the next stat to hand over.
        if case .success = result { offerTo?.adoptRecordProbe(result, finishedAt: probe.finishedAt) }
        // A batch waits: saving starts now, not at the next flush.
        if wakeFlusher { self.wakeFlusher() }
    }

    /// A stat's wait on a record probe. A failure is handed (once) to the
    /// entry's loader, which answers as a failed probe of its own would:
    /// the error, or a new probe after the backoff.
    func awaitRecordProbe(_ probe: RecordProbe, url: String, path: String) throws -> (size: Int64, mtime: Int) {
        switch probe.wait(until: Deadline.after(seconds: settings.timeout, clock: settings.clock)) {
        case .success(let info)?:
            return FileLoader.attributes(of: info)
        case .failure(let error)?:
            let (loader, handOver) = state.withLock { state in
                state.endRecordProbe(probe, of: url)
                let loader = state.liveLoader(url: url, path: path)
                let handOver = !probe.failureHandedOver
                probe.failureHandedOver = true
                return (loader, handOver)
            }
            guard let loader else { throw MediaError(ENOENT, "no such file") }
            if handOver { loader.adoptRecordProbe(.failure(error), finishedAt: probe.finishedAt) }
            return try loader.attributes()
        case nil:
            throw MediaError.io("\(MediaError.redacted(url)): no answer within \(Int(settings.timeout)) s")
        }
    }
}
