import Benchmark
import Foundation
import MediaCache

/// The manifest codec on the manifest of a 1 GiB object in 1 MiB chunks: complete (1024 chunks in one run)
/// and sparse (every other chunk: 512 chunks in 512 runs). A manifest is encoded on every chunk commit and
/// decoded on every open.
func registerManifestCodecBenchmarks() {
  let cases: [(name: String, manifest: Manifest)] = [
    ("complete 1024/1024 chunks", Fixtures.completeManifest()),
    ("sparse 512/1024 chunks", Fixtures.sparseManifest()),
  ]
  for (name, manifest) in cases {
    let encoded: Data
    do {
      encoded = try ManifestCodec.encode(manifest)
      let decoded = try ManifestCodec.decode(encoded)
      precondition(decoded == manifest, "the fixture manifest does not round-trip")
    } catch {
      fatalError("fixture manifest \(name): \(error)")
    }

    Benchmark("ManifestCodec.encode \(name)") { benchmark in
      for _ in benchmark.scaledIterations { blackHole(try ManifestCodec.encode(manifest)) }
    }

    Benchmark("ManifestCodec.decode \(name) (\(encoded.count) B)") { benchmark in
      for _ in benchmark.scaledIterations { blackHole(try ManifestCodec.decode(encoded)) }
    }
  }
}
