import Foundation
import Synchronization

/// Origins a revalidation lately failed to reach or got a 5xx from. For `window` after such a failure, a stale
/// copy that may be served stale (`Revalidation.staleAfterError`) is served without asking the origin again, so
/// an origin that is down costs one wait for its timeout per window, not one per request (nginx's upstream
/// `max_fails=1 fail_timeout=10s` does the same for its servers). A copy that may not be served stale
/// (`must-revalidate`, `no-cache`) still asks every time, and the first answer from the origin ends the outage.
final class OriginOutages: Sendable {
  /// How long a failure counts.
  static let window: Duration = .seconds(10)
  /// Origins remembered at most (when full, expired ones are dropped, then all).
  static let limit = 1024

  private let failures = Mutex<[String: ContinuousClock.Instant]>([:])

  /// The origin of `url` as the outage is remembered: scheme, host and port.
  static func origin(of url: String) -> String {
    guard let components = URLComponents(string: url) else { return url }
    let scheme = components.scheme?.lowercased() ?? ""
    let port = components.port.map { ":\($0)" } ?? ""
    return "\(scheme)://\(components.host?.lowercased() ?? "")\(port)"
  }

  /// Whether a revalidation of `url`'s origin failed less than `window` ago.
  func isDown(_ url: String, now: ContinuousClock.Instant = .now) -> Bool {
    let origin = Self.origin(of: url)
    return failures.withLock { failures in
      guard let failed = failures[origin] else { return false }
      if now - failed < Self.window { return true }
      failures[origin] = nil
      return false
    }
  }

  /// A revalidation of `url` failed (connection trouble, a timeout, a 5xx).
  func noteFailure(_ url: String, now: ContinuousClock.Instant = .now) {
    let origin = Self.origin(of: url)
    failures.withLock { failures in
      if failures.count >= Self.limit, failures[origin] == nil {
        failures = failures.filter { now - $0.value < Self.window }
        if failures.count >= Self.limit { failures.removeAll() }
      }
      failures[origin] = now
    }
  }

  /// The origin of `url` answered.
  func noteAnswer(_ url: String) {
    let origin = Self.origin(of: url)
    failures.withLock { failures in
      if !failures.isEmpty { failures[origin] = nil }
    }
  }
}
