import Benchmark
import Foundation

/// Every benchmark reports wall clock, throughput and mallocs per operation.
///
/// - `MEDIACACHE_BENCH_QUICK=1` (`Benchmarks/run --quick`) keeps each benchmark to a handful of iterations, to
///   check that the suite builds and runs rather than to measure.
/// - `MEDIACACHE_BENCH_INSTRUCTIONS=1` (`Benchmarks/run --instructions`) adds the instructions count. It is off
///   by default because package-benchmark reads it with its operating-system statistics, whose `/proc` reads
///   fall inside the malloc-counting window (16 extra mallocs per iteration on Linux), and because it needs
///   a hardware PMU that virtual machines often lack (`perf_event_open` fails; the row is then missing).
let benchmarks: @Sendable () -> Void = {
  let environment = ProcessInfo.processInfo.environment
  let quick = environment["MEDIACACHE_BENCH_QUICK"].map { !$0.isEmpty } ?? false
  let instructions = environment["MEDIACACHE_BENCH_INSTRUCTIONS"].map { !$0.isEmpty } ?? false
  Benchmark.defaultConfiguration = .init(
    metrics: [.wallClock, .throughput, .mallocCountTotal] + (instructions ? [.instructions] : []),
    warmupIterations: quick ? 1 : 3,
    maxDuration: quick ? .milliseconds(50) : .seconds(2),
    maxIterations: quick ? 5 : 10_000
  )

  registerChecksumBenchmarks()
  registerObjectIDBenchmarks()
  registerManifestCodecBenchmarks()
  registerChunkSetBenchmarks()
}
