import Foundation

extension MediaCache {
  // MARK: Namespaces

  /// One namespace of a cache directory (for example `image`, `animation`, `video`): a tree of its own under
  /// `namespaces/<name>/` with its own memory tier and disk limits, so one kind of asset cannot push another
  /// out. Configured in `Configuration.namespaces`; calls name theirs through `namespace(_:)`.
  public struct Namespace: Sendable {
    /// The name: 1 to 64 characters of `a-z`, `0-9`, `.`, `_` and `-`, not starting with `.` (`NamespaceName`).
    public var name: String
    /// Bytes its memory tier may hold.
    public var memoryCostLimit: Int
    /// Its disk limits (size, age, free space, head window), enforced on its tree alone.
    public var limits: Limits

    /// A namespace with these limits (by default a 20 MiB memory tier, 90 days, no size limit).
    public init(_ name: String, memoryCostLimit: Int = 20 << 20, limits: Limits = Limits()) {
      self.name = name
      self.memoryCostLimit = memoryCostLimit
      self.limits = limits
    }
  }

  /// The cache of namespace `name`: a `MediaCache` over `namespaces/<name>/` with the namespace's memory tier
  /// and limits, the same key function, chunk size, durability and veto as this one. The same instance each
  /// time. Throws `StoreError.invalidNamespace` for a name that cannot be one and `StoreError.noSuchNamespace`
  /// for one `Configuration.namespaces` does not list.
  public func namespace(_ name: String) throws -> MediaCache {
    try NamespaceName.validated(name)
    guard let cache = namespaces[name] else { throw StoreError.noSuchNamespace(name) }
    return cache
  }

  /// The names of the configured namespaces, sorted.
  public var namespaceNames: [String] { namespaces.keys.sorted() }

  /// The directory of namespace `name` under the cache root `root`.
  public static func namespaceDirectory(_ name: String, root: FilePath) -> FilePath {
    root.appending("namespaces").appending(name)
  }

  /// Throws `StoreError.invalidConfiguration` for a namespace name that cannot be one, or one given twice.
  static func validateNamespaces(_ configuration: Configuration) throws {
    var seen: Set<String> = []
    for namespace in configuration.namespaces {
      do {
        try NamespaceName.validated(namespace.name)
      } catch let error as StoreError {
        throw StoreError.invalidConfiguration(error.message)
      }
      guard seen.insert(namespace.name).inserted else {
        throw StoreError.invalidConfiguration("namespace '\(namespace.name)' is configured twice")
      }
      try namespace.limits.validate()
      guard namespace.memoryCostLimit >= 0 else {
        throw StoreError.invalidConfiguration(
          "namespace '\(namespace.name)': memory cost limit \(namespace.memoryCostLimit) is negative")
      }
    }
  }

  /// Opens the namespaces of `configuration` (validated): each a cache of its own under `namespaces/<name>/`.
  static func openNamespaces(_ configuration: Configuration) throws -> [String: MediaCache] {
    var opened: [String: MediaCache] = [:]
    for namespace in configuration.namespaces {
      var child = configuration
      child.directory = namespaceDirectory(namespace.name, root: configuration.directory)
      child.memoryCostLimit = namespace.memoryCostLimit
      child.maxSize = namespace.limits.maxSize
      child.maxAge = namespace.limits.maxAge
      child.lowWatermark = namespace.limits.lowWatermark
      child.minFree = namespace.limits.minFree
      child.keepHeads = namespace.limits.keepHeads
      child.namespaces = []
      opened[namespace.name] = try MediaCache(configuration: child)
    }
    return opened
  }
}

/// The rules for a namespace's name, which is also a directory name: 1 to `maxLength` characters of `a-z`,
/// `0-9`, `.`, `_` and `-`, not starting with `.`.
package enum NamespaceName {
  /// Longest name.
  package static let maxLength = 64

  /// `name` if it can name a namespace; else `StoreError.invalidNamespace` saying why.
  @discardableResult
  package static func validated(_ name: String) throws -> String {
    guard !name.isEmpty else { throw StoreError.invalidNamespace(name, reason: "the name is empty") }
    guard name.utf8.count <= maxLength else {
      throw StoreError.invalidNamespace(
        name, reason: "the name is \(name.utf8.count) bytes; the limit is \(maxLength)")
    }
    guard name.utf8.allSatisfy(isAllowed), name.first != "." else {
      throw StoreError.invalidNamespace(
        name, reason: "use a-z, 0-9, '.', '_' and '-' only, not starting with '.'")
    }
    return name
  }

  private static func isAllowed(_ byte: UInt8) -> Bool {
    (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
      || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
      || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
  }
}
