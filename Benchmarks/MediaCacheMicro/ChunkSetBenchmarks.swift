import Benchmark
import MediaCache

/// `ChunkSet` (an `IntervalSet<Int>`) as the store uses it for an object of 1024 chunks: building it chunk
/// by chunk, membership tests, and what is missing of or present in a requested range.
func registerChunkSetBenchmarks() {
  let count = Fixtures.chunkCount
  var generator = SeededGenerator(seed: 2)
  let shuffled = Array(0..<count).shuffled(using: &generator)
  // Every other chunk: the most runs (512) a set of 1024 chunks can have.
  let sparse = ChunkSet((0..<count).lazy.filter { $0 % 2 == 0 }.map { $0..<($0 + 1) })
  let probes = (0..<1_000).map { _ in Int.random(in: 0..<count, using: &generator) }
  let requested = 100..<900

  Benchmark("ChunkSet insert 1024 chunks in order") { benchmark in
    for _ in benchmark.scaledIterations {
      var set = ChunkSet()
      for index in 0..<count { set.insert(index) }
      blackHole(set)
    }
  }

  Benchmark("ChunkSet insert 1024 chunks in random order") { benchmark in
    for _ in benchmark.scaledIterations {
      var set = ChunkSet()
      for index in shuffled { set.insert(index) }
      blackHole(set)
    }
  }

  // Kilo scaling: one iteration is 1000 lookups of scattered chunks, each reported unit one lookup.
  Benchmark(
    "ChunkSet contains (512 runs)",
    configuration: .init(scalingFactor: .kilo)
  ) { benchmark in
    for index in benchmark.scaledIterations { blackHole(sparse.contains(probes[index])) }
  }

  Benchmark("ChunkSet gaps in 100..<900 (512 runs)") { benchmark in
    for _ in benchmark.scaledIterations { blackHole(sparse.gaps(in: requested)) }
  }

  Benchmark("ChunkSet intersection 100..<900 (512 runs)") { benchmark in
    for _ in benchmark.scaledIterations { blackHole(sparse.intersection(requested)) }
  }

  // What a read asks a manifest: the missing byte ranges of a request. It rebuilds the present chunks and
  // byte ranges from the CRC dictionary on every call.
  let manifest = Fixtures.sparseManifest()
  let byteRange = Int64(requested.lowerBound << 20)..<Int64(requested.upperBound << 20)
  Benchmark("Manifest.missingByteRanges 800 MiB of sparse 1 GiB") { benchmark in
    for _ in benchmark.scaledIterations { blackHole(manifest.missingByteRanges(in: byteRange)) }
  }
}
