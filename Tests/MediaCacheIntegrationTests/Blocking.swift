import Foundation

/// Runs blocking work (a socket client, a child process) on a thread of its own, so it never holds one of the
/// few threads of Swift's cooperative pool (two on a 2-core CI machine) that the in-process proxy needs to
/// answer it and every other test of the process needs to go on. A concurrent queue of our own, not the global
/// one: it targets the overcommitting root queue, which starts a thread for work as soon as every other is
/// busy (the global queue adds one for blocked workers only after a delay), and reuses idle ones.
func blocking<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
  try await withCheckedThrowingContinuation { continuation in
    blockingQueue.async { continuation.resume(with: Result { try work() }) }
  }
}

private let blockingQueue = DispatchQueue(label: "tests.blocking", attributes: .concurrent)

/// `blocking` for work that cannot throw.
func onOwnThread<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
  await withCheckedContinuation { continuation in
    blockingQueue.async { continuation.resume(returning: work()) }
  }
}
