import Benchmark
import MediaCache

/// CRC-32 as the store computes it for every chunk written and verified, at the chunk size (1 MiB) and at a
/// typical piece of a chunk as it arrives from the origin (64 KiB).
func registerChecksumBenchmarks() {
  let chunk = Fixtures.bytes(1 << 20, seed: 1)
  let piece = Array(chunk.prefix(64 << 10))

  Benchmark("CRC32.checksum 1 MiB (raw buffer)") { benchmark in
    chunk.withUnsafeBytes { raw in
      for _ in benchmark.scaledIterations { blackHole(CRC32.checksum(raw)) }
    }
  }

  Benchmark("CRC32.checksum 64 KiB (raw buffer)") { benchmark in
    piece.withUnsafeBytes { raw in
      for _ in benchmark.scaledIterations { blackHole(CRC32.checksum(raw)) }
    }
  }

  // The `some ContiguousBytes` overload, as callers holding an array or `Data` use it.
  Benchmark("CRC32.checksum 64 KiB ([UInt8])") { benchmark in
    for _ in benchmark.scaledIterations { blackHole(CRC32.checksum(piece)) }
  }
}
