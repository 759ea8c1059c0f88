// The one place the version lives; the command line and User-Agent read it.
package enum MediaCacheVersion {
    package static let string = "0.1.0"
}
