// The one place the version lives; the command line and User-Agent read it.
public enum MediaCacheVersion {
    public static let string = "0.1.0"
}
