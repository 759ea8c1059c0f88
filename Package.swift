// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "mediafs",
    products: [
        .executable(name: "mediafs", targets: ["mediafs"]),
    ],
    targets: [
        .systemLibrary(name: "CFuse", path: "CFuse", pkgConfig: "fuse3",
                       providers: [.apt(["libfuse3-dev"])]),
        .systemLibrary(name: "CCurl", path: "Sources/CCurl", pkgConfig: "libcurl",
                       providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CCrypto", path: "Sources/CCrypto", pkgConfig: "libcrypto",
                       providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CSystem", path: "Sources/CSystem"),
        // SFTP listings with their entries' attributes (libcurl reads the bytes).
        .systemLibrary(name: "CSSH2", path: "Sources/CSSH2", pkgConfig: "libssh2",
                       providers: [.apt(["libssh2-1-dev"])]),
        // The admin listener's HTTP server (status page, metrics).
        .systemLibrary(name: "CMicroHTTPD", path: "Sources/CMicroHTTPD", pkgConfig: "libmicrohttpd",
                       providers: [.apt(["libmicrohttpd-dev"])]),
        // The layers below the core, each a module of its own, so the
        // compiler keeps them from reaching up into it.
        .target(name: "MediaSupport", dependencies: ["CCurl"], exclude: ["README.md"]),
        .target(name: "MediaStore", dependencies: ["MediaSupport", "CCrypto", "CSystem"], exclude: ["README.md"]),
        .target(name: "MediaNetwork", dependencies: ["MediaSupport", "CCurl", "CSSH2", "CCrypto"], exclude: ["README.md"]),
        // What the sources say (listings, playlists, manifests, archives'
        // indexes) and how a VOD's parts become one file's bytes: below the
        // core, so it cannot reach into a loader or the catalog.
        .target(name: "MediaSources", dependencies: ["MediaSupport", "MediaStore", "MediaNetwork", "CCurl"],
                exclude: ["README.md", "Archives/README.md"]),
        .target(name: "MediaSegmented", dependencies: ["MediaSupport", "MediaStore", "MediaNetwork", "MediaSources"],
                exclude: ["README.md"]),
        .target(name: "MediaCache", dependencies: ["MediaSupport", "MediaStore", "MediaNetwork", "MediaSources", "MediaSegmented",
                                                   "CCurl", "CSystem", "CMicroHTTPD"],
                exclude: ["README.md", "Catalog/README.md", "Loader/README.md",
                          "Limits/README.md", "Admin/README.md", "ReadClasses/README.md"]),
        .target(name: "MediaFS", dependencies: ["CFuse", "CSystem", "MediaCache", "MediaStore", "MediaSupport"], exclude: ["README.md"]),
        .executableTarget(name: "mediafs", dependencies: ["MediaFS", "MediaCache", "MediaSupport", "MediaStore", "MediaNetwork",
                                                         "MediaSources", "CSystem"],
                          path: "Sources/CLI", exclude: ["README.md"]),
        // What several test targets share: fakes, a test clock, temporary
        // directories. A plain target, imported @testable by the tests.
        .target(name: "MediaTestSupport", dependencies: ["MediaSupport", "MediaNetwork"], path: "Tests/MediaTestSupport"),
        // A test target per library: its tests import that library, what it
        // depends on, and the shared support.
        .testTarget(name: "MediaSupportTests", dependencies: ["MediaSupport", "MediaTestSupport"]),
        .testTarget(name: "MediaStoreTests", dependencies: ["MediaStore", "MediaSupport", "MediaTestSupport"]),
        .testTarget(name: "MediaNetworkTests", dependencies: ["MediaNetwork", "MediaSupport", "MediaTestSupport"]),
        .testTarget(name: "MediaSourcesTests", dependencies: ["MediaSources", "MediaStore", "MediaNetwork", "MediaSupport",
                                                             "MediaTestSupport"]),
        .testTarget(name: "MediaSegmentedTests", dependencies: ["MediaSegmented", "MediaSources", "MediaStore", "MediaNetwork",
                                                               "MediaSupport", "MediaTestSupport"]),
        .testTarget(name: "MediaCacheTests", dependencies: ["MediaCache", "MediaSupport", "MediaStore", "MediaNetwork",
                                                           "MediaSources", "MediaSegmented", "MediaTestSupport"]),
        .testTarget(name: "MediaFSTests", dependencies: ["MediaFS", "MediaCache", "MediaSources", "MediaSegmented", "MediaSupport", "CFuse",
                                                        "MediaTestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
