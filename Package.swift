// swift-tools-version: 6.1
import PackageDescription

let package = Package(
  name: "MediaCache",
  // The releases with Synchronization's Mutex and Atomic, which the library uses throughout (docs/APPLE.md).
  platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .visionOS(.v2)],
  products: [
    .library(name: "MediaCache", targets: ["MediaCache"]),
    .library(name: "MediaCacheHTTP", targets: ["MediaCacheHTTP"]),
    .library(name: "MediaCacheProxy", targets: ["MediaCacheProxy"]),
    .library(name: "MediaCacheStreaming", targets: ["MediaCacheStreaming"]),
    .executable(name: "mediacache", targets: ["mediacache"]),
    .executable(name: "cache-compactor", targets: ["cache-compactor"]),
    .executable(name: "cache-fsck", targets: ["cache-fsck"]),
  ],
  dependencies: [
    .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
    .package(url: "https://github.com/apple/swift-system.git", from: "1.8.1"),
    .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
    .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
    .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
    .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
    .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
    .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
    .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
    .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
    // The library reports hits, misses, bytes, evictions, CRC failures and origin errors through swift-metrics
    // (no-op until an app bootstraps a backend); the proxy serves them, with its own, at /metrics through
    // swift-prometheus.
    .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
    .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
    // `swift package generate-documentation --target MediaCache` (and MediaCacheHTTP, MediaCacheProxy): the
    // DocC catalogs in Sources/*/*.docc; CI builds them (.ci/run). A plugin only: nothing links it.
    .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
  ],
  targets: [
    .systemLibrary(
      name: "CZlib",
      pkgConfig: "zlib",
      providers: [.apt(["zlib1g-dev"]), .brew(["zlib"])]
    ),
    // zlib's CRC-32, folded with carry-less multiplication where the CPU has it (zlib's own runs at ~4 GB/s,
    // which a cached read or a write at disk speed cannot afford); zlib itself elsewhere.
    .target(
      name: "CFastCRC",
      linkerSettings: [.linkedLibrary("z")]
    ),
    // A read that never waits for the disk (preadv2 with RWF_NOWAIT on Linux): how a cache hit whose pages are in
    // memory is read on an event loop without blocking it.
    .target(name: "CResidentRead"),
    .target(
      name: "MediaCache",
      dependencies: [
        "CFastCRC",
        "CResidentRead",
        "CZlib",
        .product(name: "Crypto", package: "swift-crypto"),
        .product(name: "SystemPackage", package: "swift-system"),
        // Counters and timers (docs/REPORTS.md, "Metrics"); swift-metrics has no dependency of its own.
        .product(name: "Metrics", package: "swift-metrics"),
        .product(name: "CoreMetrics", package: "swift-metrics"),
      ]
    ),
    // Origin fetching: range GETs through AsyncHTTPClient, kept out of the core library.
    .target(
      name: "MediaCacheHTTP",
      dependencies: [
        "MediaCache",
        // The formats a preload maps from seconds to bytes (MP4's sample tables; no I/O of its own).
        "MediaCacheStreaming",
        .product(name: "AsyncHTTPClient", package: "async-http-client"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOHTTP1", package: "swift-nio"),
        // Trust roots added to the system's (--ca-file, SSL_CERT_FILE/SSL_CERT_DIR), and TLS errors mapped;
        // NIOPosix for the one connection that reads the certificate an origin presents when it fails.
        .product(name: "NIOSSL", package: "swift-nio-ssl"),
        .product(name: "NIOPosix", package: "swift-nio"),
        // `Errno`'s words for a failed connection.
        .product(name: "SystemPackage", package: "swift-system"),
        // What it does in the background (retries, commits when a read's object closes) is logged here.
        .product(name: "Logging", package: "swift-log"),
        .product(name: "Metrics", package: "swift-metrics"),
        .product(name: "CoreMetrics", package: "swift-metrics"),
      ]
    ),
    // HLS playlists and DASH MPDs: parsing, segment enumeration, rewriting to proxy URLs, the proxy's URL forms.
    // Used by the proxy and by `mediacache fetch --hls/--dash`; no I/O, no NIO.
    .target(name: "MediaCacheStreaming", dependencies: ["MediaCache"]),
    // The local HTTP proxy players read through (an HTTP/1.1 server on SwiftNIO): Range requests, HLS playlist rewriting, metrics.
    .target(
      name: "MediaCacheProxy",
      dependencies: [
        "MediaCache",
        "MediaCacheHTTP",
        "MediaCacheStreaming",
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOPosix", package: "swift-nio"),
        .product(name: "NIOHTTP1", package: "swift-nio"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        .product(name: "UnixSignals", package: "swift-service-lifecycle"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "HTTPTypes", package: "swift-http-types"),
        // /metrics: each server's own registry, and the library's metrics once `ProxyMetrics.bootstrapGlobal`
        // made the same registry swift-metrics' backend.
        .product(name: "Prometheus", package: "swift-prometheus"),
        .product(name: "Metrics", package: "swift-metrics"),
        .product(name: "CoreMetrics", package: "swift-metrics"),
      ]
    ),
    .executableTarget(
      name: "mediacache",
      dependencies: [
        "MediaCache",
        "MediaCacheHTTP",
        "MediaCacheProxy",
        "MediaCacheStreaming",
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
        .product(name: "Logging", package: "swift-log"),
      ]
    ),
    .executableTarget(
      name: "cache-compactor",
      dependencies: [
        "MediaCache",
        "MediaCacheStreaming",
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
      ]
    ),
    .executableTarget(
      name: "cache-fsck",
      dependencies: [
        "MediaCache",
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
      ]
    ),
    // A small program the integration tests run as a second process: it writes, holds and
    // verifies objects so that crashes and cross-process locking are tested for real.
    .executableTarget(
      name: "mediacache-testhelper",
      dependencies: [
        "MediaCache", "MediaCacheTestSupport",
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
      ],
      path: "Tests/TestHelper"
    ),
    // A real HTTP origin on 127.0.0.1 for the origin-fetching tests (modes: normal, norange, chunked,
    // lastmod, truncated, wrongrange, flaky, slow, redirect, gzip, files), plus a standalone runner of it.
    .target(
      name: "MediaCacheTestOrigin",
      dependencies: [
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOPosix", package: "swift-nio"),
        .product(name: "NIOHTTP1", package: "swift-nio"),
      ],
      path: "Tests/TestOrigin"
    ),
    // What the test targets and the test tools share: one seeded random generator, temporary directories and
    // stores, a raw HTTP/1.1 client with a scoped test origin, and the tools' ArgumentParser entry point.
    .target(
      name: "MediaCacheTestSupport",
      dependencies: [
        "MediaCache", "MediaCacheHTTP", "MediaCacheTestOrigin",
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
      ],
      path: "Tests/MediaCacheTestSupport"
    ),
    .executableTarget(
      name: "mediacache-test-origin",
      dependencies: [
        "MediaCacheTestOrigin", "MediaCacheTestSupport",
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
      ],
      path: "Tests/TestOriginMain"
    ),
    .executableTarget(
      name: "mediacache-bench",
      dependencies: [
        "MediaCache", "MediaCacheTestSupport",
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOPosix", package: "swift-nio"),
        .product(name: "NIOHTTP1", package: "swift-nio"),
        .product(name: "AsyncHTTPClient", package: "async-http-client"),
      ],
      path: "tools/bench-src",
      // wrk's scripts of the `serve` and `tier` cases, run by tools/bench.
      exclude: ["serve-ranges.lua", "tier-paths.lua"]
    ),
    // Crash, fault and abuse trials against the real binaries (tools/torture).
    .executableTarget(
      name: "mediacache-torture",
      dependencies: [
        "MediaCache", "MediaCacheTestOrigin", "MediaCacheTestSupport",
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
      ],
      path: "tools/torture-src"
    ),
    .executableTarget(
      name: "mediacache-fixtures",
      dependencies: ["MediaCache", .product(name: "ArgumentParser", package: "swift-argument-parser")],
      path: "tools/make-fixtures-src"
    ),
    .testTarget(
      name: "MediaCacheTests",
      dependencies: [
        "MediaCache",
        // For the fault suites' origin fetch under a full disk (they are serialised with the other fault
        // suites, which share the process-wide I/O fault hook).
        "MediaCacheHTTP", "MediaCacheTestOrigin", "MediaCacheTestSupport",
        .product(name: "PropertyBased", package: "swift-property-based"),
        // The library's metrics, recorded by one TestMetrics bootstrapped for the whole test process.
        .product(name: "MetricsTestKit", package: "swift-metrics"),
        .product(name: "Metrics", package: "swift-metrics"),
      ]
    ),
    .testTarget(
      name: "MediaCacheHTTPTests",
      dependencies: [
        "MediaCacheHTTP", "MediaCache", "MediaCacheTestSupport", "MediaCacheTestOrigin",
        .product(name: "NIOCore", package: "swift-nio"),
      ]
    ),
    .testTarget(
      name: "MediaCacheProxyTests",
      dependencies: [
        "MediaCacheProxy", "MediaCacheStreaming", "MediaCacheTestSupport", "MediaCacheTestOrigin",
        "MediaCacheHTTP", "MediaCache", .product(name: "NIOHTTP1", package: "swift-nio"),
        .product(name: "NIOEmbedded", package: "swift-nio"),
      ]
    ),
    .testTarget(
      name: "MediaCacheIntegrationTests",
      dependencies: [
        "MediaCache", "mediacache", "cache-compactor", "cache-fsck", "mediacache-testhelper",
        "MediaCacheTestOrigin", "MediaCacheTestSupport", "MediaCacheHTTP", "MediaCacheProxy",
        "MediaCacheStreaming",
        // The blocking-call check's test runs a call on an event loop.
        .product(name: "NIOPosix", package: "swift-nio"),
        // /metrics of servers in this process, and the factory that puts the libraries' metrics on a registry.
        .product(name: "Prometheus", package: "swift-prometheus"),
        .product(name: "CoreMetrics", package: "swift-metrics"),
      ]
    ),
  ],
  swiftLanguageModes: [.v6]
)
