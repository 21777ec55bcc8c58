import ArgumentParser
import Foundation
import MediaCache

/// Exit statuses of `mediacache`, documented in the README.
enum ExitStatus: Int32 {
  /// A failure not covered below (I/O error, bad file, corrupt data).
  case failure = 1
  /// The object, or some requested bytes of it, are not cached.
  case notCached = 2
  /// The object is open in another process and was left in place.
  case busy = 3
  /// The directory is not a cache, or a cache of an unsupported format (for `purge`, also: it does not exist).
  case badCache = 4
  /// The command line is wrong in a way only found while running (ArgumentParser's own usage errors are 64 too).
  case usage = 64
}

/// Prints `message` as one line on standard error and exits with `status`.
func fail(_ message: String, _ status: ExitStatus) -> ExitCode {
  FileHandle.standardError.write(Data("mediacache: \(message)\n".utf8))
  return ExitCode(status.rawValue)
}

/// Runs a subcommand body, turning library errors into one line on standard error and an exit status.
///
/// With `onIOExecutor` (the cache commands: `import`, `cat`, `inspect`, `ls`, `status`, `stats`, `pin`,
/// `unpin`, `purge`, `rm`, `clear`) the body runs with `IOExecutor.shared` as its task's executor, as the
/// proxy's requests do: the library's synchronous calls it makes (opening the cache, a manager, a removal)
/// block one of the executor's threads, never the cooperative pool (`MEDIACACHE_BLOCKING_CHECK`). `fetch`,
/// `preload` and `proxy` make theirs through the async API and keep the pool: the proxy's lifetime (its
/// signals, its shutdown's timer) must not queue behind the disk's work.
func reportingErrors(onIOExecutor: Bool = false, _ body: () async throws -> Void) async throws {
  do {
    if onIOExecutor {
      try await withTaskExecutorPreference(IOExecutor.shared) { try await body() }
    } else {
      try await body()
    }
  } catch let error as StoreError {
    switch error.code {
    case .notFound, .notCached, .noSuchCache: throw fail(error.description, .notCached)
    case .busy: throw fail(error.description, .busy)
    case .notACache, .unsupportedFormat: throw fail(error.description, .badCache)
    default: throw fail(error.description, .failure)
    }
  } catch let error as ExitCode {
    throw error
  } catch let error as CleanExit {
    throw error
  } catch let error as ValidationError {
    throw error
  } catch {
    throw fail("\(error)", .failure)
  }
}
