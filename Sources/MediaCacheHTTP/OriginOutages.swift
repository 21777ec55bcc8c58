import Foundation
import Synchronization

/// Origins a revalidation lately failed to reach, and URLs it lately got a 5xx for. For `window` after such a
/// failure, a stale copy that may be served stale (`Revalidation.staleAfterError`) of that origin (connection
/// failures and timeouts: the whole origin is down) or of that URL (a 5xx: one resource failing says nothing of
/// the others) is served without asking again, so an origin that is down costs one wait for its timeout per
/// window, not one per request (nginx's upstream `max_fails=1 fail_timeout=10s` does the same for its servers).
/// A copy that may not be served stale (`must-revalidate`, `no-cache`) still asks every time, and the first
/// answer from the origin (to a revalidation or a fetch) ends the outage.
final class OriginOutages: Sendable {
  /// How long a failure counts.
  static let window: Duration = .seconds(10)
  /// Origins and URLs remembered at most (when full, expired ones are dropped, then all).
  static let limit = 1024

  /// By origin (`origin(of:)`) and by URL.
  private let failures = Mutex<[String: ContinuousClock.Instant]>([:])

  /// The origin of `url` as the outage is remembered: scheme, host and port (after a space, which no URL has,
  /// so it is never taken for a URL's key).
  static func origin(of url: String) -> String {
    guard let components = URLComponents(string: url) else { return "origin \(url)" }
    let scheme = components.scheme?.lowercased() ?? ""
    let port = components.port.map { ":\($0)" } ?? ""
    return "origin \(scheme)://\(components.host?.lowercased() ?? "")\(port)"
  }

  /// Whether a revalidation of `url` or (connection trouble) of its origin failed less than `window` ago.
  func isDown(_ url: String, now: ContinuousClock.Instant = .now) -> Bool {
    guard !failures.withLock({ $0.isEmpty }) else { return false }
    let keys = [url, Self.origin(of: url)]
    return failures.withLock { failures in
      keys.contains { key in
        guard let failed = failures[key] else { return false }
        if now - failed < Self.window { return true }
        failures[key] = nil
        return false
      }
    }
  }

  /// A revalidation of `url` failed: with connection trouble or a timeout (`originWide`), or a 5xx.
  func noteFailure(_ url: String, originWide: Bool, now: ContinuousClock.Instant = .now) {
    let key = originWide ? Self.origin(of: url) : url
    failures.withLock { failures in
      if failures.count >= Self.limit, failures[key] == nil {
        failures = failures.filter { now - $0.value < Self.window }
        if failures.count >= Self.limit { failures.removeAll() }
      }
      failures[key] = now
    }
  }

  /// The origin answered a request for `url`.
  func noteAnswer(_ url: String) {
    guard !failures.withLock({ $0.isEmpty }) else { return }
    let origin = Self.origin(of: url)
    failures.withLock { failures in
      failures[url] = nil
      failures[origin] = nil
    }
  }
}
