// `mediafs mount`: reads the arguments, refuses bad input before anything is
// mounted, then hands over to the FUSE adapter.
import CSystem
import Foundation
import MediaCache
import MediaNetwork
import MediaSources
import MediaStore
import MediaSupport
import MediaFS
#if canImport(Glibc)
import Glibc
#endif

struct MountCommand {
    var sources: [String] = []
    var mountpoint = ""
    var cache = CacheOptions()
    var daemon = DaemonOptions()
    var reads = ReadOptions()
    var preloadNext: Catalog.PreloadNext?
    var http = HTTPOptions()
    var metrics: MetricsAddress?
    var remoteControl = RemoteControlOptions()
    var dirCacheTime = Catalog.defaultDirCacheTime
    var listingDoubt = ListingDoubt()
    /// `--poll-interval`, `--poll-rate`: nil, no polls (the default).
    var poll: PollSchedule?
    var pollRate = PollSchedule.defaultPerSecond
    var s3 = S3Settings()
    var hlsVariant = HLSListing.VariantChoice.highest
    /// Whether a listing's RAR sets and ZIP files are folders of their members.
    var archives = true
    var scanners = ProcessClassifier.defaultScanners
    /// `--reader-class`, in the order given: asked before the default rules.
    var readerRules: [ReaderRule] = []

    static let usage = """
        usage: mediafs mount [OPTIONS] SOURCE... MOUNTPOINT
               mediafs status MOUNTPOINT [--json] [--watch] [--readers]
               mediafs purge PATH...
               mediafs preload [--bytes N] PATH...
               mediafs pin|unpin PATH...
               mediafs cache ls|gc|clear [--cache-dir DIR] [LIMITS] [URL...]
               mediafs add URL... --to MOUNTPOINT
               mediafs remove NAME... --from MOUNTPOINT

        SOURCE is an http(s) URL, an .m3u/.m3u8 playlist (path or URL), a list
        file (one URL per line, '#' comments, 'NAME<TAB>URL' to choose a name),
        a WebDAV collection, an S3 prefix or an HLS playlist (URL). Each URL
        becomes a read-only file;
        a URL ending in '/' whose answer is an HTML index becomes a directory.
        A dav://host/path/ or davs://host/path/ URL (WebDAV over http or https)
        becomes a directory tree, each directory listed with one PROPFIND;
        user:pass@ or --netrc, Basic or Digest. s3://BUCKET/PREFIX/ becomes a
        directory tree ('/' separates directories), with sizes and dates from
        its listing. S3 keys come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
        and AWS_SESSION_TOKEN, else from the profile (AWS_PROFILE or
        --s3-profile, else 'default') in ~/.aws/credentials and ~/.aws/config
        (re-read when they change); none: anonymous. Never on the command line.
        sftp://[USER@]HOST[:PORT]/PATH/ becomes a directory tree, each directory
        one SFTP listing with sizes and dates (a URL to a file is that file);
        keys from ~/.ssh or --ssh-key, the agent, or a password (URL, --netrc);
        the host key must be in ~/.ssh/known_hosts or --ssh-known-hosts.
        ftp://HOST/PATH/ (TLS per --ftp-tls) and ftps://HOST/PATH/ likewise,
        each directory one MLSD; user:pass@ or --netrc; --cacert for a private CA.
        An HLS video-on-demand playlist (http(s) URL, on the command line or in
        a list file) becomes one file: NAME.ts (MPEG-TS segments) or NAME.mp4
        (fMP4), its segments' bytes in order; a master playlist becomes its
        chosen variant, with NAME.audio-LANG.EXT beside it per audio rendition.
        A static DASH MPD (URL ending .mpd) becomes NAME.mp4 and NAME.audio-LANG.mp4.
        One SOURCE that is a directory (an index URL ending in '/', dav(s)://,
        sftp://, ftp(s)://, s3://) is the mount's root: its entries are at MOUNTPOINT. Several
        SOURCEs, a file, a playlist or a list file: one name per source there.

        options:
          -f, --foreground     stay in the foreground, log to stderr
        \(CacheOptions.help)
          -o OPT[,OPT...]      FUSE mount options, e.g. allow_other
          --timeout SECONDS    how long a read waits for missing bytes (default 30)
          --retries N          transfers a read may retry, with backoff (default 3)
          --header 'Name: value'   send this header with every request (repeatable)
          --config FILE        per-host headers: [host] or [host:port] sections of
                               'Name: value' lines (never sent to another host)
          --netrc              take credentials from ~/.netrc
          --proxy URL          send every request through this proxy: http://,
                               https://, socks5://, socks5h:// (names resolved by
                               the proxy), socks4://, socks4a://; user:pass@ goes
                               to the proxy only. Wins over http_proxy,
                               https_proxy and all_proxy; no_proxy still applies
          --cacert FILE        verify https servers (and an https proxy) with the
                               PEM CA certificates in FILE, for private CAs
          --ssh-key FILE       for sftp:// sources: the private key to log in with
                               (default: ~/.ssh/id_ed25519, id_ecdsa, id_rsa;
                               the agent at SSH_AUTH_SOCK is asked too)
          --ssh-known-hosts FILE  verify sftp:// servers' host keys against FILE
                               (default ~/.ssh/known_hosts); an unknown or
                               changed key refuses the mount
          --ftp-tls required|try|off  for ftp:// sources: TLS (AUTH TLS) before
                               the login, required (the default: no password in
                               clear), tried, or off (plain FTP); ftps:// is TLS
                               from the start
          --s3-endpoint URL    an S3-compatible endpoint, path-style: MinIO, B2,
                               R2, Ceph (default: AWS_ENDPOINT_URL_S3,
                               AWS_ENDPOINT_URL, the profile's endpoint_url,
                               else AWS, virtual-host style)
          --s3-region REGION   the buckets' region, for signing (default:
                               AWS_REGION, AWS_DEFAULT_REGION, the profile's
                               region, else us-east-1)
          --s3-profile NAME    the AWS profile to take keys from (as AWS_PROFILE);
                               in fstab: s3://BUCKET/PREFIX/ /srv/media fuse.mediafs
                               s3_endpoint=URL,s3_region=REGION,s3_profile=NAME 0 0
          --hls-variant highest|lowest|HEIGHT  which variant of an HLS master
                               playlist becomes the file: the highest BANDWIDTH
                               (default), the lowest, or a height such as 720
          --archives on|off    a listed RAR set or ZIP file as a folder of its
                               stored members, read by range (on, the default),
                               or its volumes as plain files (off)
          --preload-next N[:SIZE]  on open, preload SIZE (default 4M) leading
                               bytes of the next N files
          --revalidate never|open|DURATION  when to check that a file is
                               unchanged on open (default 1m: if last checked
                               more than a minute ago)
          --dir-cache-time DURATION  how long a directory listing is believed
                               before it is fetched again, in the background
                               (default 5m; setfattr -n user.mediafs.refresh
                               on a directory re-lists it now)
          --listing-doubt DURATION  a listing that drops most of a directory's
                               names (more than half and more than 5, or all)
                               is believed only when a second one, this long
                               after, says the same (default 30s; 0: believe
                               every listing)
          --poll-interval DURATION  ask each listed directory this often
                               whether it changed, for one small request
                               (WebDAV: PROPFIND depth 0; HTML index: a
                               conditional GET, else the page; S3: the first
                               listing page), and list only a changed one
                               again (default: off)
          --poll-rate N        directories polled a second at most (20)
          --no-passthrough     always read through the daemon, never let the
                               kernel read complete files from the cache itself
          --bwlimit RATE       download at most RATE bytes per second for the
                               whole mount, e.g. 8M (K/M/G: 1024); reads go
                               first, then readahead, then preload
          --scanners NAME[,NAME...]  processes whose reads are a library scan
                               (no kernel readahead, behind players for the network,
                               in --scan-cache-size), besides ffprobe,
                               mediainfo, exiftool, Plex Media Scanner, Plex
                               Media Fingerprinter, mediascanner (and any
                               process asking for one frame, -vframes 1); a
                               leading '=' replaces that list ('=' alone: no
                               scans)
          --reader-class 'NAME [WORD...]=CLASS'  processes named NAME ('*': any)
                               whose arguments hold each WORD read as CLASS
                               (play, scan or background), before the default
                               rules; 'parent:NAME=CLASS' by the parent's name
          --background-bwlimit RATE  background jobs download at most RATE
                               bytes per second (default: what players leave)
          --background-daily SIZE  background jobs fetch at most SIZE a day
                               (UTC); then their reads of uncached bytes fail
          --handle-grace DURATION  how long a closed player's handle keeps its
                               readahead and running transfers for an open
                               that reads on where it stopped (default 5s;
                               0: a close stops them)
          --metrics ADDR:PORT  serve a status page at http://ADDR:PORT/ and Prometheus
                               metrics at /metrics, e.g. 127.0.0.1:9101
                               (loopback: this machine only)
          --rc ADDR:PORT       serve rclone's remote control (core/version,
                               vfs/forget, vfs/refresh, vfs/list, vfs/stats,
                               rc/noop, core/pid) there, e.g. 127.0.0.1:5572;
                               needs --rc-user with --rc-pass-file FILE (or
                               MEDIAFS_RC_PASS in the environment),
                               --rc-htpasswd FILE, or --rc-no-auth (loopback only)
          -d, --debug          log every request
          -h, --help           show this help
          -V, --version        show the version
        """

    init(arguments: [String]) throws {
        var positional: [String] = []
        var rest = arguments[...]
        func value(_ option: String) throws -> String {
            guard let next = rest.popFirst() else { throw UsageError("\(option) needs a value") }
            return next
        }
        while let argument = rest.popFirst() {
            let (option, inline) = UsageError.split(argument)
            switch option {
            case "-f", "--foreground": daemon.foreground = true
            case "-d", "--debug": daemon.debug = true
            case _ where try cache.take(option, value: { try inline ?? value(option) }): break
            case "--revalidate": try setRevalidate(inline ?? value(option))
            case "--dir-cache-time": try setDirCacheTime(inline ?? value(option))
            case "--listing-doubt": try setListingDoubt(inline ?? value(option))
            case "--poll-interval": try setPollInterval(inline ?? value(option))
            case "--poll-rate": try setPollRate(inline ?? value(option))
            case "--header": try addHeader(inline ?? value(option))
            case "--config": try loadConfig(inline ?? value(option))
            case "--netrc": http.netrc = true
            case "--hls-variant": try setHLSVariant(inline ?? value(option))
            case "--archives": try setArchives(inline ?? value(option))
            case "--proxy": try setProxy(inline ?? value(option))
            case "--cacert": try setCAFile(inline ?? value(option))
            case "--ssh-key": try setSSHKey(inline ?? value(option))
            case "--ftp-tls": try setFTPTLS(inline ?? value(option))
            case "--ssh-known-hosts": try setKnownHosts(inline ?? value(option))
            case "--no-passthrough": daemon.passthrough = false
            case "--retries": try setRetries(inline ?? value(option))
            case "--bwlimit": try setBandwidthLimit(inline ?? value(option))
            case "--metrics": try setMetrics(inline ?? value(option))
            case _ where try remoteControl.take(option, value: { try inline ?? value(option) }): break
            case "--scanners": try setScanners(inline ?? value(option))
            case "--handle-grace": try setHandleGrace(inline ?? value(option))
            case "--reader-class": try addReaderRule(inline ?? value(option))
            case "--background-bwlimit": try setBackgroundBandwidthLimit(inline ?? value(option))
            case "--background-daily": try setBackgroundDaily(inline ?? value(option))
            case "-o":
                for key in try value(option).split(separator: ",") { try mountOption(String(key)) }
            case "--timeout": try setTimeout(inline ?? value(option))
            case "--preload-next": try setPreloadNext(inline ?? value(option))
            case "--s3-endpoint": s3.endpoint = try inline ?? value(option)
            case "--s3-region": s3.region = try inline ?? value(option)
            case "--s3-profile": s3.profile = try inline ?? value(option)
            case "--": positional += rest; rest = []
            default:
                if option.hasPrefix("-") && option.count > 1 { throw UsageError("unknown option '\(argument)'") }
                positional.append(argument)
            }
        }
        guard positional.count >= 2 else {
            throw UsageError(positional.isEmpty ? "missing SOURCE and MOUNTPOINT" : "missing MOUNTPOINT")
        }
        mountpoint = positional.removeLast()
        sources = positional
    }

    /// An `-o` key: mediafs's own options as fstab writes them
    /// (`cache_dir=DIR`), mount(8)'s bookkeeping dropped, the rest for FUSE.
    private mutating func mountOption(_ key: String) throws {
        let parts = key.split(separator: "=", maxSplits: 1).map(String.init)
        let value = parts.count > 1 ? parts[1] : nil
        switch parts[0] {
        case "cache_dir", "cache-dir", "cache_max_size", "cache-max-size", "cache_min_free", "cache-min-free",
             "cache_max_age", "cache-max-age", "cache_max_age_complete", "cache-max-age-complete",
             "scan_cache_size", "scan-cache-size":
            let option = "--" + parts[0].replacingOccurrences(of: "_", with: "-")
            guard let value else { throw UsageError("-o \(parts[0]) needs a value") }
            _ = try cache.take(option) { value }
        case "revalidate":
            try setRevalidate(value ?? "")
        case "dir_cache_time", "dir-cache-time":
            try setDirCacheTime(value ?? "")
        case "listing_doubt", "listing-doubt":
            try setListingDoubt(value ?? "")
        case "rc", "rc_user", "rc-user", "rc_pass_file", "rc-pass-file", "rc_htpasswd", "rc-htpasswd",
             "rc_no_auth", "rc-no-auth":
            let option = "--" + parts[0].replacingOccurrences(of: "_", with: "-")
            if option == "--rc-no-auth" {
                _ = try remoteControl.take(option) { "" }
            } else {
                guard let value else { throw UsageError("-o \(parts[0]) needs a value") }
                _ = try remoteControl.take(option) { value }
            }
        case "poll_interval", "poll-interval":
            try setPollInterval(value ?? "")
        case "poll_rate", "poll-rate":
            try setPollRate(value ?? "")
        case "config":
            try loadConfig(value ?? "")
        case "netrc":
            http.netrc = true
        case "proxy":
            try setProxy(value ?? "")
        case "cacert":
            try setCAFile(value ?? "")
        case "ssh_key", "ssh-key":
            try setSSHKey(value ?? "")
        case "ftp_tls", "ftp-tls":
            try setFTPTLS(value ?? "")
        case "ssh_known_hosts", "ssh-known-hosts":
            try setKnownHosts(value ?? "")
        case "no_passthrough", "no-passthrough":
            daemon.passthrough = false
        case "retries":
            try setRetries(value ?? "")
        case "bwlimit":
            try setBandwidthLimit(value ?? "")
        case "metrics":
            try setMetrics(value ?? "")
        case "handle_grace", "handle-grace":
            try setHandleGrace(value ?? "")
        case "scanners":
            try setScanners((value ?? "").replacingOccurrences(of: ":", with: ","))
        case "background_bwlimit", "background-bwlimit":
            try setBackgroundBandwidthLimit(value ?? "")
        case "background_daily", "background-daily":
            try setBackgroundDaily(value ?? "")
        case "timeout":
            try setTimeout(value ?? "")
        case "preload_next", "preload-next":
            try setPreloadNext(value ?? "")
        case "hls_variant", "hls-variant":
            try setHLSVariant(value ?? "")
        case "archives":
            try setArchives(value ?? "")
        case "s3_endpoint", "s3-endpoint":
            s3.endpoint = value ?? ""
        case "s3_region", "s3-region":
            s3.region = value ?? ""
        case "s3_profile", "s3-profile":
            s3.profile = value ?? ""
        case "debug":
            daemon.debug = true
        case "foreground":
            daemon.foreground = true
        case "rw", "defaults", "auto", "noauto", "nofail", "_netdev", "user", "users", "nouser", "dev", "suid", "exec":
            break
        default:
            if parts[0].hasPrefix("x-") || parts[0].hasPrefix("comment=") { break }
            daemon.fuseOptions.append(key)
        }
    }

    private mutating func setArchives(_ text: String) throws {
        switch text {
        case "on": archives = true
        case "off": archives = false
        default: throw UsageError("--archives takes on or off, not '\(text)'")
        }
    }

    private mutating func setHLSVariant(_ text: String) throws {
        guard let choice = HLSListing.VariantChoice(text) else {
            throw UsageError("--hls-variant '\(text)' is not highest, lowest or a height such as 720")
        }
        hlsVariant = choice
    }

    private mutating func addHeader(_ line: String) throws {
        guard HTTPOptions.validHeader(line) else {
            throw UsageError("--header needs 'Name: value', not '\(line)'")
        }
        http.headers.append(line)
    }

    private mutating func loadConfig(_ path: String) throws {
        guard !path.isEmpty else { throw UsageError("--config needs a file") }
        try http.load(config: path)
    }

    private mutating func setProxy(_ text: String) throws {
        do {
            http.proxy = try HTTPOptions.checkedProxy(text)
        } catch let error as MediaError {
            throw UsageError(error.message)
        }
    }

    private mutating func setCAFile(_ path: String) throws {
        http.caFile = try HTTPOptions.checkedCAFile(path, relativeTo: FileManager.default.currentDirectoryPath)
    }

    private mutating func setFTPTLS(_ text: String) throws {
        guard let security = FTPSecurity(rawValue: text) else {
            throw UsageError("--ftp-tls takes required, try or off, not '\(text)'")
        }
        http.ftpTLS = security
    }

    private mutating func setSSHKey(_ path: String) throws {
        do {
            try http.ssh.setKey(path, relativeTo: FileManager.default.currentDirectoryPath)
        } catch let error as MediaError {
            throw UsageError(error.message)
        }
    }

    private mutating func setKnownHosts(_ path: String) throws {
        do {
            try http.ssh.setKnownHosts(path, relativeTo: FileManager.default.currentDirectoryPath)
        } catch let error as MediaError {
            throw UsageError(error.message)
        }
    }

    private mutating func setRetries(_ text: String) throws {
        guard let count = Int(text), (0...100).contains(count) else {
            throw UsageError("--retries needs a number from 0 to 100, not '\(text)'")
        }
        reads.retries = count
    }

    private mutating func setBandwidthLimit(_ text: String) throws {
        guard let rate = Units.bytes(text), BandwidthLimit(bytesPerSecond: rate) != nil else {
            throw UsageError("--bwlimit needs a rate of at least \(BandwidthLimit.minRate / 1024)K per second "
                             + "such as 8M, not '\(text)'")
        }
        reads.bandwidthLimit = rate
    }

    private mutating func setBackgroundBandwidthLimit(_ text: String) throws {
        guard let rate = Units.bytes(text), BandwidthLimit(bytesPerSecond: rate) != nil else {
            throw UsageError("--background-bwlimit needs a rate of at least \(BandwidthLimit.minRate / 1024)K per "
                             + "second such as 2M, not '\(text)'")
        }
        reads.backgroundBandwidthLimit = rate
    }

    private mutating func setBackgroundDaily(_ text: String) throws {
        guard let bytes = Units.bytes(text), bytes > 0, Limits.isLength(bytes) else {
            throw UsageError("--background-daily needs a size such as 20G, not '\(text)'")
        }
        reads.backgroundDaily = bytes
    }

    private mutating func addReaderRule(_ text: String) throws {
        switch ReaderRule.parse(text) {
        case .success(let rule): readerRules.append(rule)
        case .failure(let error):
            throw UsageError("--reader-class needs 'NAME [WORD...]=CLASS' or 'parent:NAME=CLASS' "
                             + "(CLASS: play, scan or background), not '\(text)': \(error.message)")
        }
    }

    private mutating func setMetrics(_ text: String) throws {
        guard let address = MetricsAddress(text) else {
            throw UsageError("--metrics needs ADDR:PORT such as 127.0.0.1:9101 or [::1]:9101 "
                             + "(a numeric address or localhost), not '\(text)'")
        }
        metrics = address
    }

    private mutating func setScanners(_ text: String) throws {
        guard let names = ProcessClassifier.scanners(from: text) else {
            throw UsageError("--scanners needs NAME[,NAME...] (or =NAME[,NAME...] to replace the list), not '\(text)'")
        }
        scanners = names
    }

    private mutating func setHandleGrace(_ text: String) throws {
        guard let seconds = Units.seconds(text), seconds <= 3600 else {
            throw UsageError("--handle-grace needs a duration of at most 1h such as 5s, or 0, not '\(text)'")
        }
        reads.handleGrace = seconds
    }

    private mutating func setRevalidate(_ text: String) throws {
        switch text {
        case "never": reads.revalidateAfter = nil
        case "open": reads.revalidateAfter = 0
        default:
            guard let seconds = Units.seconds(text) else {
                throw UsageError("--revalidate takes never, open or a duration such as 5m, not '\(text)'")
            }
            reads.revalidateAfter = seconds
        }
    }

    private mutating func setDirCacheTime(_ text: String) throws {
        guard let seconds = Units.seconds(text) else {
            throw UsageError("--dir-cache-time needs a duration such as 90s, 5m or 1h, not '\(text)'")
        }
        dirCacheTime = seconds
    }

    private mutating func setListingDoubt(_ text: String) throws {
        guard let seconds = Units.seconds(text) else {
            throw UsageError("--listing-doubt needs a duration such as 30s or 2m (0: believe every listing), not '\(text)'")
        }
        listingDoubt = ListingDoubt(delay: seconds)
    }

    private mutating func setPollInterval(_ text: String) throws {
        guard let seconds = Units.seconds(text), seconds >= 1 || seconds == 0, seconds <= 86_400 else {
            throw UsageError("--poll-interval needs a duration from 1s to 24h such as 30s or 5m (0: off), not '\(text)'")
        }
        poll = seconds == 0 ? nil : PollSchedule(interval: seconds, perSecond: pollRate)
    }

    private mutating func setPollRate(_ text: String) throws {
        guard text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }), text.utf8.count <= 4,
              let rate = Int(text), rate >= 1, Double(rate) <= PollSchedule.maxPerSecond else {
            throw UsageError("--poll-rate needs a whole number of directories a second from 1 to "
                             + "\(Int(PollSchedule.maxPerSecond)), not '\(text)'")
        }
        pollRate = Double(rate)
        poll = poll.map { PollSchedule(interval: $0.interval, perSecond: pollRate) }
    }

    private mutating func setTimeout(_ text: String) throws {
        guard let seconds = Units.seconds(text), seconds > 0 else {
            throw UsageError("--timeout needs a positive duration such as 30 or 2m, not '\(text)'")
        }
        reads.timeout = seconds
    }

    private mutating func setPreloadNext(_ text: String) throws {
        let parts = text.split(separator: ":", maxSplits: 1).map(String.init)
        guard let count = Int(parts.first ?? ""), count >= 0 else {
            throw UsageError("--preload-next needs N or N:SIZE such as 2:8M, not '\(text)'")
        }
        var bytes = Catalog.PreloadNext.defaultBytes
        if parts.count > 1 {
            guard let size = Units.bytes(parts[1]) else {
                throw UsageError("--preload-next size '\(parts[1])' is not a byte count such as 8M")
            }
            bytes = size
        }
        preloadNext = count > 0 ? Catalog.PreloadNext(count: count, bytes: bytes) : nil
    }

    func run() throws {
        Log.configure(level: daemon.debug ? .debug : .info, sink: .stderr)
        // Without -f: this process starts the daemon and waits for its
        // mount (DaemonStart says why it does not fork).
        let readyDescriptor = daemon.foreground ? nil : DaemonStart.takeReadyDescriptor()
        if !daemon.foreground && readyDescriptor == nil {
            let absolute = mountpoint.hasPrefix("/") ? mountpoint
                : FileManager.default.currentDirectoryPath + "/" + mountpoint
            exit(DaemonStart.spawnAndWait(arguments: ProgramArguments.all,
                                          mountpoint: absolute, timeout: reads.timeout))
        }
        Self.raiseDescriptorLimit()
        mediafs_malloc_tune()
        var withS3 = self.http
        var s3Mount: S3Mount?
        if sources.contains(where: S3Prefix.isS3) {
            let settled = try s3.resolve(environment: ProcessInfo.processInfo.environment)
            withS3.s3Origins = try settled.origins(forArguments: sources)
            s3Mount = settled
        }
        let http = withS3
        try MediaFS.checkMountpoint(mountpoint)
        // The mount's one clock, handed to every part that reads time.
        let clock = Clock.system
        let store = try CacheStore(root: cache.resolvedDirectory)
        // Before mounting, so a second mount fails with nothing to undo;
        // before the arguments are read, since their saved copies are the cache's.
        let lock = try CacheLock(directory: store.root, wait: CacheLock.departureWait, clock: clock,
                                 isMounted: MediaFS.isMounted(resolved:))
        let (parsed, fromSaved) = try Source.read(arguments: sources, clock: clock, s3: s3Mount, hlsVariant: hlsVariant, http: http,
                                                  saved: SavedPresentations(store: store)) {
            try TextFetch.get($0, options: http, clock: clock)
        }
        var settings = LoaderSettings()
        settings.clock = clock
        settings.timeout = reads.timeout
        settings.maxAttempts = reads.retries + 1
        settings.readClasses = !scanners.isEmpty || !readerRules.isEmpty
        settings.handleGrace = reads.handleGrace
        settings.backgroundDaily = reads.backgroundDaily.map { BackgroundAllowance(bytesPerDay: $0, store: store,
                                                                                    clock: clock) }
        var options = MediaFS.Options(mountpoint: mountpoint.hasPrefix("/") ? mountpoint
                                      : FileManager.default.currentDirectoryPath + "/" + mountpoint)
        // Resolved now: once mounted, resolving it would ask the mount itself.
        let resolved = realpath(options.mountpoint, nil).map { path in
            defer { free(path) }
            return String(cString: path)
        }
        options.onMounted = {
            if let resolved { lock.serving(at: resolved) }
            if let readyDescriptor { DaemonStart.detach(readyDescriptor: readyDescriptor) }
        }
        options.onUnmounted = { lock.departing() }
        options.fuseOptions = daemon.fuseOptions
        options.passthrough = daemon.passthrough
        options.scanners = scanners
        options.readerRules = readerRules
        let limits = cache.limits
        let bandwidthLimit = reads.bandwidthLimit
        let backgroundBandwidthLimit = reads.backgroundBandwidthLimit
        // Bound now, so an address in use fails before anything is mounted.
        let exposition = MetricsExposition(cacheLimit: limits.maxSize, bandwidthLimit: bandwidthLimit)
        let control = try remoteControl.resolve(mountpoint: options.mountpoint,
                                                environment: ProcessInfo.processInfo.environment)
        if let address = metrics {
            if !address.isLoopback {
                Log.warning("--metrics \(address) is reachable from other machines; 127.0.0.1 keeps it local")
            }
            options.listeners.append(try AdminListener(address: address, exposition: exposition,
                                                       remoteControl: remoteControl.address == address ? control : nil))
        }
        if let address = remoteControl.address, address != metrics {
            options.listeners.append(try AdminListener(address: address, exposition: exposition, remoteControl: control))
        }
        let statistics = Statistics(clock: clock)
        let readTimeout = Int(reads.timeout.rounded(.up))
        let readTimeoutSeconds = reads.timeout
        let preloadNext = self.preloadNext
        let revalidateAfter = reads.revalidateAfter
        let dirCacheTime = self.dirCacheTime
        let listingDoubt = self.listingDoubt
        let poll = self.poll
        let hlsVariant = self.hlsVariant
        let archives = self.archives
        // One directory URL is mounted as its root; anything else, a name per source.
        let sourceIsRoot = Source.isMountRoot(arguments: sources, parsed: parsed)
        let fs = MediaFS(options: options, clock: clock) {
            let curl = CurlFetcher(clock: clock, options: http, statistics: statistics,
                                   limit: bandwidthLimit.flatMap(BandwidthLimit.init(bytesPerSecond:)),
                                   backgroundLimit: backgroundBandwidthLimit.flatMap(BandwidthLimit.init(bytesPerSecond:)),
                                   readTimeout: readTimeoutSeconds)
            // sftp:// files are read on libssh2's kept sessions, the rest by libcurl.
            let network = SFTPFetcher(base: curl, options: http, timeout: readTimeout, clock: clock,
                                      bytesPerSecond: bandwidthLimit)
            // The catalog serves segmented VODs' files from their segments'
            // URLs over it: the arguments' now, those listings find once found.
            return Catalog(sources: parsed, sourceIsRoot: sourceIsRoot, store: store, fetcher: network,
                           settings: settings, http: http,
                           preloadNext: preloadNext, limits: limits, revalidateAfter: revalidateAfter,
                           dirCacheTime: dirCacheTime, listingDoubt: listingDoubt, statistics: statistics, hlsVariant: hlsVariant,
                           readAgain: fromSaved, archives: archives, poll: poll)
        }
        // The lock is held until the process exits, after the last flush.
        try withExtendedLifetime(lock) {
            defer { store.stop() }
            try fs.run()
        }
    }
}

extension MountCommand {
    /// Debian's soft limit is 1,024 descriptors; the hard one is far higher.
    /// A mount needs some per connection and per open data file (capped by
    /// OpenDataFiles), not per entry, but the headroom costs nothing.
    static func raiseDescriptorLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) != 0 {
            Log.debug("cannot raise the descriptor limit: \(String(cString: strerror(errno)))")
        }
    }
}

struct UsageError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }

    /// `--name=value` as ("--name", "value"); anything else as (argument, nil).
    static func split(_ argument: String) -> (option: String, inline: String?) {
        guard argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") else { return (argument, nil) }
        return (String(argument[..<equals]), String(argument[argument.index(after: equals)...]))
    }
}
