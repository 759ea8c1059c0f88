// The Prometheus text format (version 0.0.4) of a mount's counters: names
// `mediafs_…` with the unit in the name and `_total` on counters, each with
// HELP and TYPE lines. Built on demand from Statistics and the catalog.
import MediaSupport

public struct MetricsExposition: Sendable {
    /// `--cache-max-size`, shown as the limit next to the bytes used.
    public var cacheLimit: Int64?
    /// `--bwlimit` in bytes per second.
    public var bandwidthLimit: Int64?

    public init(cacheLimit: Int64? = nil, bandwidthLimit: Int64? = nil) {
        self.cacheLimit = cacheLimit
        self.bandwidthLimit = bandwidthLimit
    }

    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    public func text(for catalog: Catalog) -> String {
        let statistics = catalog.statistics
        let counters = statistics.snapshot
        let usage = catalog.cacheUsage()
        var out = Output()
        out.metric("mediafs_network_received_bytes_total", .counter,
                   "File bytes received from the servers (response bodies).", counters.bytesFromNetwork)
        out.header("mediafs_class_fetched_bytes_total", .counter,
                   "File bytes received from the servers by read class (play: players; scan: library scans and lookups; "
                   + "background: jobs no one watches).")
        for readClass in ReadClass.allCases {
            out.sample("mediafs_class_fetched_bytes_total{class=\"\(readClass.label)\"}",
                       counters.fetchedByClass[readClass.rawValue])
        }
        out.header("mediafs_class_served_bytes_total", .counter, "Bytes reads returned, by read class.")
        for readClass in ReadClass.allCases {
            out.sample("mediafs_class_served_bytes_total{class=\"\(readClass.label)\"}",
                       counters.servedByClass[readClass.rawValue])
        }
        let readers = catalog.readers.totals().sorted { $0.key < $1.key }
        out.header("mediafs_reader_read_bytes_total", .counter,
                   "Bytes reads returned, by read class and process name (at most "
                   + "\(ReaderBook.maxNames) names, the rest as \"other\").")
        for (key, totals) in readers {
            out.sample("mediafs_reader_read_bytes_total{\(Self.readerLabels(key))}", totals.read)
        }
        out.header("mediafs_reader_fetched_bytes_total", .counter,
                   "File bytes received from the servers for reads, by read class and process name.")
        for (key, totals) in readers {
            out.sample("mediafs_reader_fetched_bytes_total{\(Self.readerLabels(key))}", totals.fetched)
        }
        if let allowance = catalog.settings.backgroundDaily {
            out.metric("mediafs_background_daily_used_bytes", .gauge,
                       "Bytes background jobs fetched today (UTC), against --background-daily.", allowance.usedToday)
            out.metric("mediafs_background_daily_limit_bytes", .gauge,
                       "What background jobs may fetch a day (--background-daily).", allowance.bytesPerDay)
        }
        out.metric("mediafs_grace_resumes_total", .counter,
                   "Opens that went on with a closed handle's readahead (--handle-grace).", counters.graceResumes)
        out.metric("mediafs_transfers_yielded_total", .counter,
                   "Long transfers, held at their reader's window, that gave their connection to a waiting read.",
                   counters.transfersYielded)
        out.metric("mediafs_scan_reads_delayed_total", .counter,
                   "Library scans' reads that waited for a place while players' reads or readahead ran or waited.",
                   counters.scanReadsDelayed)
        out.metric("mediafs_cache_read_bytes_total", .counter,
                   "Bytes reads through the daemon took from the cache.", counters.bytesFromCache)
        out.metric("mediafs_passthrough_opens_total", .counter,
                   "Opens whose reads the kernel serves from the cache itself (FUSE passthrough).",
                   counters.kernelReadOpens)
        out.metric("mediafs_attribute_requests_total", .counter,
                   "Stats that reached the daemon (getattr); readdirplus and the kernel's cache answer the rest.",
                   counters.attributeRequests)
        out.metric("mediafs_kernel_entry_notifications_total", .counter,
                   "Kernel entries of names a listing refresh added, removed or changed, invalidated at once.",
                   counters.kernelEntryNotifications)
        out.header("mediafs_http_responses_total", .counter,
                   "HTTP responses by status class; error: a request that got no response.")
        for kind in Statistics.ResponseClass.allCases {
            let count = kind.rawValue < counters.responses.count ? counters.responses[kind.rawValue] : 0
            out.sample("mediafs_http_responses_total{class=\"\(kind.label)\"}", count)
        }
        out.metric("mediafs_transfers_total", .counter, "File transfers started.", counters.requests)
        out.metric("mediafs_retries_total", .counter,
                   "Transfers started again for bytes an earlier transfer failed to bring.", counters.retries)
        out.metric("mediafs_transfers_in_flight", .gauge, "File transfers running or queued now.",
                   counters.transfersInFlight)
        out.metric("mediafs_cache_used_bytes", .gauge, "Bytes the mount's files hold in the cache.",
                   usage.cachedBytes)
        if let cacheLimit {
            out.metric("mediafs_cache_limit_bytes", .gauge, "The cache size limit (--cache-max-size).", cacheLimit)
        }
        out.metric("mediafs_cache_entries", .gauge, "Files of the mount with bytes in the cache.",
                   Int64(usage.entriesWithBytes))
        out.metric("mediafs_evictions_total", .counter, "Cache entries removed to keep the cache limits.",
                   counters.evictions)
        if let bandwidthLimit {
            out.metric("mediafs_bandwidth_limit_bytes_per_second", .gauge,
                       "The mount's download limit (--bwlimit).", bandwidthLimit)
        }
        out.histogram("mediafs_read_wait_seconds",
                      "How long reads through the daemon took, from the request to the bytes in its buffer.",
                      statistics.timings.readWait.snapshot)
        out.histogram("mediafs_probe_duration_seconds",
                      "How long learning a file's length and validators took (HEAD, or GET bytes=0-0).",
                      statistics.timings.probeDuration.snapshot)
        return out.text
    }

    /// `class="…",process="…"` of a ReaderBook total's key (`class/name`).
    static func readerLabels(_ key: String) -> String {
        let (readClass, name) = key.firstIndex(of: "/").map { (key[..<$0], key[key.index(after: $0)...]) }
            ?? (Substring(key), "")
        return "class=\"\(labelValue(readClass))\",process=\"\(labelValue(name))\""
    }

    /// A label value as the text format escapes it: backslash, quote, newline.
    static func labelValue(_ text: Substring) -> String {
        var out = ""
        for character in text {
            switch character {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(character)
            }
        }
        return out
    }

    enum Kind: String { case counter, gauge, histogram }

    struct Output {
        var text = ""

        mutating func header(_ name: String, _ kind: Kind, _ help: String) {
            text += "# HELP \(name) \(help)\n# TYPE \(name) \(kind.rawValue)\n"
        }

        mutating func sample(_ name: String, _ value: Int64) {
            text += "\(name) \(value)\n"
        }

        mutating func metric(_ name: String, _ kind: Kind, _ help: String, _ value: Int64) {
            header(name, kind, help)
            sample(name, value)
        }

        mutating func histogram(_ name: String, _ help: String, _ snapshot: Histogram.Snapshot) {
            header(name, .histogram, help)
            for (bound, count) in snapshot.buckets {
                let le = bound.isInfinite ? "+Inf" : "\(bound)"
                text += "\(name)_bucket{le=\"\(le)\"} \(count)\n"
            }
            text += "\(name)_sum \(snapshot.sum)\n\(name)_count \(snapshot.count)\n"
        }
    }
}
