import MediaCache
import MediaCacheHTTP
import MediaCacheTestOrigin

/// Runs `body` with a `CachingReader` (`client`, `configuration`) over a fresh cache (`chunkSize`, relaxed
/// durability) in a temporary directory, and a fresh origin. Afterwards, also when `body` throws, the reader's
/// origin requests are cancelled, the client and the origin shut down and the directory removed.
public func withReader(
  chunkSize: Int, client: OriginClient = OriginClient(), configuration: CachingReader.Configuration,
  _ body: (CachingReader, TestOrigin, MediaCache) async throws -> Void
) async throws {
  let dir = try TemporaryDirectory()
  defer { dir.cleanup() }
  let cache = try MediaCache(
    configuration: .init(directory: FilePath(dir.file("cache")), chunkSize: chunkSize, durability: .relaxed))
  let reader = CachingReader(cache: cache, client: client, configuration: configuration)
  try await withOrigin { origin in
    do {
      try await body(reader, origin, cache)
    } catch {
      await reader.cancelAll()
      try? await client.shutdown()
      throw error
    }
    await reader.cancelAll()
    try await client.shutdown()
  }
}
