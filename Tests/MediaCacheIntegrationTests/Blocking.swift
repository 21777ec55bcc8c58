import Foundation

/// Runs blocking work (a socket client, a child process) on a Dispatch thread, so it never holds one of the
/// few threads of Swift's cooperative pool that the in-process proxy needs to answer it.
func blocking<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
  try await withCheckedThrowingContinuation { continuation in
    DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
  }
}

/// `run` on a Dispatch thread.
func runBlocking(_ program: String, _ arguments: [String], environment: [String: String]? = nil) async throws
  -> CommandResult
{
  try await blocking { try run(program, arguments, environment: environment) }
}
