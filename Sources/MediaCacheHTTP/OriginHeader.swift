import MediaCache
import Synchronization

/// A header field the cache adds to its origin requests (credentials such as a bearer token, a cookie or a
/// signed header): `OriginClient.Configuration.headers`, `--origin-header` of `mediacache proxy|fetch|preload`.
///
/// Checked when made: the name is an HTTP token, the value has no control characters (no CR or LF: nothing can
/// be smuggled into the request), and the fields the cache sets itself (`Range`, `If-Range`, `Accept-Encoding`,
/// `Host`, the framing and connection fields) are refused. The value is a secret: `description` shows the name
/// only, and no log line or file of the cache holds it.
public struct OriginHeader: Sendable, Equatable, CustomStringConvertible {
  /// The field name, as given.
  public let name: String
  /// The field value.
  public let value: String

  /// The longest value accepted (a large JWT is a few KiB).
  public static let maxValueBytes = 16 << 10

  /// Fields the cache sets or the connection owns (lowercased).
  static let reserved: Set<String> = [
    "range", "if-range", "if-none-match", "if-modified-since", "if-match", "if-unmodified-since",
    "accept-encoding", "host", "content-length", "transfer-encoding", "connection", "keep-alive", "te",
    "trailer", "upgrade", "proxy-connection", "expect",
  ]

  /// Names whose presence makes a request one "with credentials" for a shared cache's storage rule
  /// (`OriginClient.Configuration.isSharedCache`).
  static let credentialNames: Set<String> = ["authorization", "cookie"]

  /// A header `name: value`; throws `OriginError.invalidHeader` saying what is wrong (never echoing the value).
  public init(name: String, value: String) throws(OriginError) {
    guard !name.isEmpty, name.utf8.count <= 256, name.utf8.allSatisfy(Self.isTokenByte) else {
      // Not shown: a mistyped field may hold its secret in what was taken for the name.
      throw .invalidHeader(name: "", reason: "the name is not an HTTP field name (letters, digits, -)")
    }
    if Self.reserved.contains(name.lowercased()) {
      throw .invalidHeader(name: name, reason: "the cache sets this field itself")
    }
    let trimmed = value.trimmingSpaces()
    guard trimmed.utf8.count <= Self.maxValueBytes else {
      throw .invalidHeader(name: name, reason: "the value is longer than \(Self.maxValueBytes) bytes")
    }
    guard trimmed.utf8.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }) else {
      throw .invalidHeader(name: name, reason: "the value holds a control character (CR, LF, NUL ...)")
    }
    self.name = name
    self.value = trimmed
  }

  /// A header from `Name: value` (as curl's `-H`); throws `OriginError.invalidHeader`.
  public init(parsing field: String) throws(OriginError) {
    guard let colon = field.firstIndex(of: ":") else {
      throw .invalidHeader(name: "", reason: "expected 'Name: value' (no colon)")
    }
    try self.init(name: String(field[..<colon]), value: String(field[field.index(after: colon)...]))
  }

  /// Whether this field carries credentials (`Authorization`, `Cookie`).
  public var isCredential: Bool { Self.credentialNames.contains(name.lowercased()) }

  /// The name and a placeholder: the value is never shown.
  public var description: String { "\(name): <\(value.utf8.count) bytes>" }

  static func isTokenByte(_ byte: UInt8) -> Bool { StoredHeaders.isTokenByte(byte) }
}

extension OriginClient {
  /// Header fields added to the origin requests started within the current task and the tasks it starts
  /// (`TaskLocal`): a proxy passes a player's own `Authorization` or `Cookie` on this way
  /// (`mediacache proxy --forward-header`). A forwarded field replaces a configured one of the same name.
  /// A request a flight started for another reader is not given them: two players of one object share its
  /// origin requests.
  @TaskLocal public static var forwardedHeaders: [OriginHeader] = []

  /// Counts the origin requests started within the current task and the tasks it starts (a proxy's access
  /// log: how many requests answering one player's request cost); nil: not counted.
  @TaskLocal package static var requestCounter: OriginRequestCounter?
}

/// A count of origin requests (`OriginClient.requestCounter`).
package final class OriginRequestCounter: Sendable {
  private let count = Atomic<Int>(0)

  /// A count at zero.
  package init() {}

  /// The requests counted so far.
  package var value: Int { count.load(ordering: .relaxed) }

  func increment() { count.add(1, ordering: .relaxed) }
}
