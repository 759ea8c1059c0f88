// How `mediafs mount` runs the daemon and talks to FUSE: in the foreground
// or spawned, its log level, the options passed to libfuse, passthrough.
struct DaemonOptions {
    /// `-f`: stay in the foreground, log to stderr.
    var foreground = false
    /// `-d`: log every request.
    var debug = false
    /// `-o` options not mediafs's own, handed to libfuse.
    var fuseOptions: [String] = []
    /// Off with `--no-passthrough`: every read goes through the daemon.
    var passthrough = true
}
