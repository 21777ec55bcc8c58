// swift-tools-version: 6.1
import PackageDescription

let package = Package(
  name: "MediaCache",
  platforms: [.macOS(.v15)],
  products: [
    .library(name: "MediaCache", targets: ["MediaCache"]),
    .executable(name: "mediacache", targets: ["mediacache"]),
    .executable(name: "cache-compactor", targets: ["cache-compactor"]),
    .executable(name: "cache-fsck", targets: ["cache-fsck"]),
  ],
  dependencies: [
    .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
    .package(url: "https://github.com/apple/swift-system.git", from: "1.8.1"),
    .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
    .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
  ],
  targets: [
    .systemLibrary(
      name: "CZlib",
      pkgConfig: "zlib",
      providers: [.apt(["zlib1g-dev"]), .brew(["zlib"])]
    ),
    .target(
      name: "MediaCache",
      dependencies: [
        "CZlib",
        .product(name: "Crypto", package: "swift-crypto"),
        .product(name: "SystemPackage", package: "swift-system"),
      ]
    ),
    .executableTarget(
      name: "mediacache",
      dependencies: [
        "MediaCache",
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
      ]
    ),
    .executableTarget(
      name: "cache-compactor",
      dependencies: [
        "MediaCache",
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
      dependencies: ["MediaCache"],
      path: "Tests/TestHelper"
    ),
    .executableTarget(
      name: "mediacache-bench",
      dependencies: ["MediaCache"],
      path: "tools/bench-src"
    ),
    .executableTarget(
      name: "mediacache-fixtures",
      dependencies: ["MediaCache"],
      path: "tools/make-fixtures-src"
    ),
    .testTarget(
      name: "MediaCacheTests",
      dependencies: [
        "MediaCache",
        .product(name: "PropertyBased", package: "swift-property-based"),
      ]
    ),
    .testTarget(
      name: "MediaCacheIntegrationTests",
      dependencies: ["MediaCache", "mediacache", "cache-compactor", "cache-fsck", "mediacache-testhelper"]
    ),
  ],
  swiftLanguageModes: [.v6]
)
