import Foundation

/// The string an object is cached under, after the cache's key function has been applied.
///
/// Usually the origin URL. Two requests share cached bytes exactly when their keys are equal.
public struct CacheKey: Sendable, Hashable, CustomStringConvertible, ExpressibleByStringLiteral {
  /// The key as given.
  public let rawValue: String

  /// A key with exactly this text.
  public init(_ rawValue: String) { self.rawValue = rawValue }

  /// A key with the literal's text, as `CacheKey(_:)` (no key function is applied).
  public init(stringLiteral value: String) { self.rawValue = value }

  /// The object id this key names.
  public var objectID: ObjectID { ObjectID(self) }

  /// The key's text, unchanged.
  public var description: String { rawValue }
}

/// Turns what a caller asks for (a URL or any string) into the key an object is stored under.
///
/// The default keeps the string as given. A typical custom one drops the query parameters that a CDN
/// adds to sign a URL, so that a re-signed URL still finds the bytes already cached:
///
/// ```swift
/// let config = MediaCache.Configuration(
///   keyFunction: .removingQueryItems(["Expires", "Signature", "Key-Pair-Id", "token"]))
/// ```
public struct KeyFunction: Sendable {
  private let transform: @Sendable (String) -> String

  /// A key function from any transform of the requested string. The transform must be a function of the
  /// string alone (the same string, the same key): callers may remember the key, or the object id, of a
  /// string they met before.
  public init(_ transform: @escaping @Sendable (String) -> String) { self.transform = transform }

  /// The key for `requested`.
  public func key(for requested: String) -> CacheKey { CacheKey(transform(requested)) }

  /// The string as given.
  public static let identity = KeyFunction { $0 }

  /// Drops the named query items (compared case-insensitively) from URLs; other strings pass unchanged.
  /// An emptied query is removed with its `?`; the remaining items keep their order.
  public static func removingQueryItems(_ names: Set<String>) -> KeyFunction {
    let lowered = Set(names.map { $0.lowercased() })
    return KeyFunction { requested in
      guard var components = URLComponents(string: requested), let items = components.percentEncodedQueryItems
      else { return requested }
      let kept = items.filter { !lowered.contains($0.name.lowercased()) }
      components.percentEncodedQueryItems = kept.isEmpty ? nil : kept
      return components.string ?? requested
    }
  }
}
