import MediaCacheTestOrigin

/// Runs `body` with a fresh origin (serving `fileRoot` in the `files` mode when given), shut down afterwards
/// even when `body` throws.
public func withOrigin<T>(fileRoot: String? = nil, _ body: (TestOrigin) async throws -> T) async throws -> T {
  let origin = try await TestOrigin.start(fileRoot: fileRoot)
  do {
    let result = try await body(origin)
    try await origin.shutdown()
    return result
  } catch {
    try? await origin.shutdown()
    throw error
  }
}
