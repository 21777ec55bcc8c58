import Benchmark
import MediaCache

/// SHA-256 of a cache key to its object id: done for every request before any file is opened.
func registerObjectIDBenchmarks() {
  let key = Fixtures.key

  Benchmark(
    "ObjectID(CacheKey) SHA-256 of a URL key",
    configuration: .init(scalingFactor: .kilo)
  ) { benchmark in
    for _ in benchmark.scaledIterations { blackHole(ObjectID(key)) }
  }
}
