import Synchronization

/// The faults a soak caused, each with when it began and ended (wall-clock seconds, as the proxy's access log
/// stamps its lines), and the rule that says which failed request a fault explains.
final class SoakTimeline: Sendable {
  /// A fault class.
  enum Kind: String, Codable, CaseIterable {
    /// SIGKILL of the proxy; the window ends when the restarted proxy listens.
    case proxyKill = "proxy-kill"
    /// The origin answers 503 to every request.
    case serverErrors = "origin-server-errors"
    /// The origin sends half of each body, then closes.
    case cutBodies = "origin-cut-bodies"
    /// The origin sends bodies slowly.
    case slowBodies = "origin-slow-bodies"
    /// One object's ETag (and bytes) changed at the origin.
    case etagChange = "origin-etag-change"
    /// The cache's file system is full.
    case diskFull = "disk-full"
    /// The HTTPS origin presents a self-signed certificate: every new handshake fails verification.
    case tlsHandshake = "origin-tls-handshake"
  }

  struct Window: Sendable {
    var kind: Kind
    var start: Double
    var end: Double?
    /// The object it concerns (`etagChange`), nil for all.
    var object: String?
  }

  /// How long after a fault's end a failure may still be its doing: the proxy's origin retries back off for
  /// up to a few seconds, and a request that waited on them ends later.
  static let originGrace = 15.0
  /// A response cut by a kill ends a moment later at the client.
  static let killGrace = 1.0

  private let windows = Mutex<[Window]>([])
  /// The objects read over HTTPS, the only ones a failed handshake concerns.
  let httpsObjects: Set<String>

  init(httpsObjects: Set<String> = []) { self.httpsObjects = httpsObjects }

  /// Records the start of a fault; returns its index for `end`.
  func begin(_ kind: Kind, object: String? = nil, at time: Double = now()) -> Int {
    windows.withLock { windows in
      windows.append(Window(kind: kind, start: time, end: nil, object: object))
      return windows.count - 1
    }
  }

  func end(_ index: Int, at time: Double = now()) { windows.withLock { $0[index].end = time } }

  var all: [Window] { windows.withLock { $0 } }

  /// Whether any window, extended by `grace` after its end, overlaps `[from, to]`.
  func isFaulted(from: Double, to: Double, grace: Double) -> Bool {
    windows.withLock { windows in
      windows.contains { $0.start <= to && ($0.end ?? .infinity) + grace >= from }
    }
  }

  /// The fault that explains a request on `object` that ran `[started, ended]` and failed as `failure`, or nil
  /// when none does (a failure then). A kill explains any failure of a request it overlapped; a full disk, 5xx
  /// bursts and cut bodies explain 5xx answers and cut responses up to `originGrace` after they end; a changed
  /// ETag explains those on its object, a failed TLS handshake those on the objects read over HTTPS; slow
  /// bodies explain a timeout. A wrong answer (another status, a head
  /// that contradicts the request) is never explained.
  func explain(_ failure: SoakFailure, object: String?, started: Double, ended: Double) -> Kind? {
    guard failure != .wrongAnswer else { return nil }
    let found = windows.withLock { windows -> [Kind] in
      windows.compactMap { window -> Kind? in
        let end = window.end ?? .infinity
        switch window.kind {
        case .proxyKill:
          return window.start <= ended + Self.killGrace && end + Self.killGrace >= started ? .proxyKill : nil
        case .serverErrors, .cutBodies, .diskFull:
          guard failure == .serverError || failure == .cut || failure == .noResponse else { return nil }
          return window.start <= ended && end + Self.originGrace >= started ? window.kind : nil
        case .etagChange:
          guard failure == .serverError || failure == .cut || failure == .noResponse, window.object == object
          else { return nil }
          return window.start <= ended && end + Self.originGrace >= started ? window.kind : nil
        case .tlsHandshake:
          guard failure == .serverError || failure == .cut || failure == .noResponse,
            object.map(httpsObjects.contains) == true
          else { return nil }
          return window.start <= ended && end + Self.originGrace >= started ? window.kind : nil
        case .slowBodies:
          guard failure == .timeout else { return nil }
          return window.start <= ended && end + Self.originGrace >= started ? window.kind : nil
        }
      }
    }
    return Kind.allCases.first { found.contains($0) }
  }
}
