import Foundation

/// A fresh, empty directory under the system temporary directory, removed by `cleanup()`.
public struct TemporaryDirectory: Sendable {
  /// Its absolute path.
  public let path: String

  /// Creates a new directory named `mediacache-test-<UUID>`.
  public init() throws {
    path =
      FileManager.default.temporaryDirectory
      .appendingPathComponent("mediacache-test-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
  }

  /// Removes the directory and everything in it.
  public func cleanup() { try? FileManager.default.removeItem(atPath: path) }

  /// The path of `name` inside the directory.
  public func file(_ name: String) -> String { "\(path)/\(name)" }
}

/// A new, empty directory under the system temporary directory (the caller removes it).
public func makeTemporaryDirectory() throws -> String {
  try TemporaryDirectory().path
}

/// Runs `body` with a fresh temporary directory and removes the directory (and everything in it) afterwards,
/// whether `body` returns or throws.
public func withTemporaryDirectory<T>(_ body: (String) async throws -> T) async throws -> T {
  let directory = try TemporaryDirectory()
  defer { directory.cleanup() }
  return try await body(directory.path)
}
