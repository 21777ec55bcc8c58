import ArgumentParser
import MediaCache
import MediaCacheHTTP
import MediaCacheStreaming

/// Runs `body` with a reader over the cache whose origin client and limits come from the options (TLS trust,
/// request limits), then waits for the commits and shuts the client down. An origin, playlist or MPD error
/// ends the command with its one line. `fetch` (plain, `--hls`, `--dash`) and `preload` share it, so an option
/// cannot apply to one and not another. Commits come often enough that an interrupted fetch loses at most a
/// second (or 32 MiB) of work, and seldom enough that durable mode does not fsync more than it must.
func withCachingReader(
  cache: CacheOptions, origin: OriginOptions, chunkSize: Int, durability: Durability,
  requestLimits: RequestLimitOptions, _ body: (CachingReader) async throws -> Void
) async throws {
  let client = try origin.client()
  let mediaCache = try await cache.openOnExecutor(
    chunkSize: chunkSize, durability: durability, commitPolicy: .init(bytes: 32 << 20, interval: .seconds(1)))
  let reader = CachingReader(cache: mediaCache, client: client, configuration: requestLimits.configuration())
  do {
    try await body(reader)
  } catch {
    await reader.finishOpenObjects()  // what was fetched is committed before the process ends
    try? await client.shutdown()
    switch error {
    case let error as OriginError: throw fail(error.description, .failure)
    case let error as HLSError: throw fail(error.description, .failure)
    case let error as MPDError: throw fail(error.description, .failure)
    case let error as MP4Error: throw fail(error.description, .failure)
    default: throw error
    }
  }
  await reader.finishOpenObjects()
  try? await client.shutdown()
}
