// Probes of listed entries that have no loader: a listing's background
// probes (fed by the ProbeFeeder) and the stats that overtake them. Their
// answers go into the entries' records and the unsaved answers, so a scan
// that stats every file of a listing makes no loader.
import Foundation

extension Catalog {
    /// The feeder's start: probes a listed entry in the background, through
    /// its loader if it has one, else into its record, unless its size is
    /// known or a probe of it runs. Returns whether `settled` will be called.
    func probeListed(_ url: String, then settled: @escaping @Sendable () -> Void) -> Bool {
        enum Start { case loader(FileLoader), record(RecordProbe), none }
        let start: Start = state.withLock { state in
            if let loader = state.loaders[url] { return .loader(loader) }
            guard let record = state.records[url], record.size == nil, state.probing[url] == nil else { return .none }
            let probe = RecordProbe()
            state.probing[url] = probe
            return .record(probe)
        }
        switch start {
        case .loader(let loader):
            // Settled on the network thread: the next start, which takes
            // the catalog's lock, runs on the probes' worker instead.
            let answers = probeAnswers
            return loader.prefetchInfo(then: { if !answers.submit(settled) { settled() } })
        case .record(let probe):
            startRecordProbe(probe, url: url, priority: .probe, then: settled)
            return true
        case .none:
            return false
        }
    }

    /// Sends a record probe's request; call without the lock. Its answer
    /// comes on the network thread, which must not wait for the catalog's
    /// lock (a listing or a flush may hold it for a while): it is taken on
    /// the probes' worker, which then starts the feeder's next probe.
    func startRecordProbe(_ probe: RecordProbe, url: String, priority: FetchRequest.Priority,
                          then settled: (@Sendable () -> Void)? = nil) {
        let answers = probeAnswers
        probe.started(ContentProbe.start(url: url, fetcher: fetcher, priority: priority) { [weak self] result in
            let answer: @Sendable () -> Void = { [weak self] in
                self?.recordProbeFinished(probe, url: url, result)
                probe.finish(result)
                settled?()
            }
            // Stopping: the answer is given here, as the mount ends.
            if !answers.submit(answer) { probe.finish(result) }
        })
    }

    /// A record probe's answer goes into the record, its metadata among the
    /// unsaved; a loader made meanwhile is offered it instead. A failure is
    /// kept for the next stat to hand to a loader (`awaitRecordProbe`),
    /// whose backoff then governs the next probe.
    private func recordProbeFinished(_ probe: RecordProbe, url: String, _ result: Result<ContentInfo, MediaError>) {
        let now = settings.clock.wall()
        let (offerTo, wakeFlusher) = state.withLock { state -> (FileLoader?, Bool) in
            // A failure stays, so that the next stat answers it at once.
            if state.probing[url] === probe, case .success = result { state.probing[url] = nil }
            guard case .success(let info) = result else { return (nil, false) }
            if let loader = state.loaders[url] { return (loader, false) }
            return (nil, state.learn(info, of: url, at: now) && state.unsaved.count == Self.saveBatch)
        }
        if case .failure(let error) = result { Log.warning("\(MediaError.redacted(url)): \(error.message)") }
        // A failure waits in `probing` for the next stat to hand over.
        if case .success = result { offerTo?.adoptRecordProbe(result, finishedAt: probe.finishedAt) }
        // A batch waits: saving starts now, not at the next flush.
        if wakeFlusher { flusher.wake() }
    }

    /// A stat's wait on a record probe. A failure is handed (once) to the
    /// entry's loader, which answers as a failed probe of its own would:
    /// the error, or a new probe after the backoff.
    func awaitRecordProbe(_ probe: RecordProbe, url: String, path: String) throws -> (size: Int64, mtime: Int) {
        switch probe.wait(until: Deadline.after(seconds: settings.timeout)) {
        case .success(let info)?:
            return FileLoader.attributes(of: info)
        case .failure(let error)?:
            let (loader, handOver) = state.withLock { state in
                if state.probing[url] === probe { state.probing[url] = nil }
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
