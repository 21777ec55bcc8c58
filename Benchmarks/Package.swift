// swift-tools-version: 6.1
// Micro-benchmarks of MediaCache's hot pure functions (CRC-32, object ids, the manifest codec, chunk sets),
// kept in their own package so that the main package's build and resolution do not pull in package-benchmark.
// Run them with `Benchmarks/run` (or `swift package --package-path Benchmarks benchmark`).
import PackageDescription

let package = Package(
  name: "MediaCacheBenchmarks",
  platforms: [.macOS(.v15)],
  dependencies: [
    // Named, because a path package is otherwise known by its folder's name (`main`, `wt-…`, a clone's).
    .package(name: "MediaCache", path: ".."),
    // Only the MallocInterposer trait: malloc counts are what these benchmarks are for. The default
    // RuntimeInterposer trait (ARC counts on Linux with Swift 6.3) is left off: no metric here needs it, and
    // without it swift-runtime-interposer is neither resolved nor built.
    .package(url: "https://github.com/ordo-one/benchmark", exact: "1.38.1", traits: ["MallocInterposer"]),
  ],
  targets: [
    // The plugin finds benchmark targets by their folder: a direct child of a folder named `Benchmarks`.
    .executableTarget(
      name: "MediaCacheMicro",
      dependencies: [
        .product(name: "MediaCache", package: "MediaCache"),
        .product(name: "Benchmark", package: "benchmark"),
      ],
      path: "MediaCacheMicro",
      plugins: [
        .plugin(name: "BenchmarkPlugin", package: "benchmark")
      ]
    )
  ],
  swiftLanguageModes: [.v6]
)
