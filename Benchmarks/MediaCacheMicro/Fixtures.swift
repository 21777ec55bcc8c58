import Foundation
import MediaCache

/// SplitMix64: a tiny seeded generator, so every run benchmarks the same bytes and the same "random" orders.
struct SeededGenerator: RandomNumberGenerator {
  private var state: UInt64

  init(seed: UInt64) { state = seed }

  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var mixed = state
    mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
    mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
    return mixed ^ (mixed >> 31)
  }
}

enum Fixtures {
  static let chunkSize = 1 << 20
  /// A 1 GiB object in 1 MiB chunks.
  static let objectLength: Int64 = 1 << 30
  static let chunkCount = Int(objectLength / Int64(chunkSize))
  static let key = CacheKey("https://cdn.example.com/media/2024/feature-film/1080p/segment-000123.mp4")

  /// `count` pseudo-random bytes.
  static func bytes(_ count: Int, seed: UInt64) -> [UInt8] {
    var generator = SeededGenerator(seed: seed)
    var result: [UInt8] = []
    result.reserveCapacity(count)
    while result.count < count {
      withUnsafeBytes(of: generator.next()) { result.append(contentsOf: $0.prefix(count - result.count)) }
    }
    return result
  }

  /// The manifest of the 1 GiB object with the chunks for which `isPresent` holds, each with a CRC, and
  /// the validators an origin typically gives.
  static func manifest(present isPresent: (Int) -> Bool) -> Manifest {
    var generator = SeededGenerator(seed: 0x6D61_6E69)
    var manifest = Manifest(
      objectID: key.objectID, chunkSize: chunkSize, contentLength: objectLength,
      createdAt: Date(timeIntervalSince1970: 1_700_000_000), contentType: "video/mp4",
      etag: "\"5f3c2a1b-40000000\"", lastModified: "Tue, 14 Nov 2023 22:13:20 GMT")
    for index in 0..<chunkCount where isPresent(index) {
      manifest.setChunk(index, crc: UInt32(truncatingIfNeeded: generator.next()))
    }
    return manifest
  }

  /// Every chunk present.
  static func completeManifest() -> Manifest { manifest { _ in true } }

  /// Every other chunk present: 512 chunks in 512 runs, the most runs an object of 1024 chunks can have.
  static func sparseManifest() -> Manifest { manifest { $0 % 2 == 0 } }
}
