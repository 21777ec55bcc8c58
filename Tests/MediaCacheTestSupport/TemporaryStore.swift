import MediaCache

/// Runs `body` with a store at `<fresh temporary directory>/cache` and removes the directory afterwards.
package func withStore<T>(
  chunkSize: Int = 4096, durability: Durability = .relaxed, _ body: (ShardedStore) async throws -> T
) async throws -> T {
  try await withTemporaryDirectory { directory in
    let store = try ShardedStore(root: "\(directory)/cache", chunkSize: chunkSize, durability: durability)
    return try await body(store)
  }
}
