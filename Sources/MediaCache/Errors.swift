import SystemPackage

/// Why a manifest's bytes were refused: what is wrong (`code`), where in the manifest and what was found
/// (`description`, as `cache-fsck` prints it).
///
/// A struct with an open set of codes, as NIOFileSystem's `FileSystemError`, rather than an enum: a new code
/// does not break a caller's exhaustive `switch`. Match on `code`; the static members named after each code
/// build the errors that are thrown, and two errors are equal when they say the same thing.
public struct ManifestError: Error, Sendable, Equatable, CustomStringConvertible {
  /// The failure with its details, for this package's own code and tests.
  package enum Kind: Sendable, Equatable {
    case truncated(needed: Int, available: Int, field: String)
    case badMagic(found: [UInt8])
    case unsupportedVersion(major: UInt8, minor: UInt8)
    case checksumMismatch(stored: UInt32, computed: UInt32)
    case invalidField(name: String, reason: String)
    case objectIDMismatch(expected: ObjectID, found: ObjectID)
    case trailingBytes(count: Int)
  }

  package var kind: Kind

  package init(kind: Kind) { self.kind = kind }

  /// What kind of failure (named as the case of `kind`).
  public var code: Code { Code(caseOf: kind) }

  /// An error of code `truncated`.
  public static func truncated(needed: Int, available: Int, field: String) -> ManifestError {
    ManifestError(kind: .truncated(needed: needed, available: available, field: field))
  }
  /// An error of code `badMagic`.
  public static func badMagic(found: [UInt8]) -> ManifestError {
    ManifestError(kind: .badMagic(found: found))
  }
  /// An error of code `unsupportedVersion`.
  public static func unsupportedVersion(major: UInt8, minor: UInt8) -> ManifestError {
    ManifestError(kind: .unsupportedVersion(major: major, minor: minor))
  }
  /// An error of code `checksumMismatch`.
  public static func checksumMismatch(stored: UInt32, computed: UInt32) -> ManifestError {
    ManifestError(kind: .checksumMismatch(stored: stored, computed: computed))
  }
  /// An error of code `invalidField`.
  public static func invalidField(name: String, reason: String) -> ManifestError {
    ManifestError(kind: .invalidField(name: name, reason: reason))
  }
  /// An error of code `objectIDMismatch`.
  public static func objectIDMismatch(expected: ObjectID, found: ObjectID) -> ManifestError {
    ManifestError(kind: .objectIDMismatch(expected: expected, found: found))
  }
  /// An error of code `trailingBytes`.
  public static func trailingBytes(count: Int) -> ManifestError {
    ManifestError(kind: .trailingBytes(count: count))
  }

  /// One line for a person: what is wrong and where, with the values found (as `cache-fsck` prints it).
  public var description: String {
    switch kind {
    case .truncated(let needed, let available, let field):
      "truncated at \(field): needs \(needed) bytes, \(available) left"
    case .badMagic(let found):
      "bad magic \(found.map { String($0, radix: 16) }.joined(separator: " ")), expected MCMF"
    case .unsupportedVersion(let major, let minor): "unsupported manifest version \(major).\(minor)"
    case .checksumMismatch(let stored, let computed):
      "manifest CRC mismatch: stored \(hex32(stored)), computed \(hex32(computed))"
    case .invalidField(let name, let reason): "invalid \(name): \(reason)"
    case .objectIDMismatch(let expected, let found): "manifest is for object \(found), expected \(expected)"
    case .trailingBytes(let count): "\(count) unexpected bytes after the last field"
    }
  }
}

/// A failure of the on-disk store: what went wrong (`code`), the object or path it concerns, one line for a
/// person (`message`, also `description`) and the underlying cause where there is one (the `errno` of a failed
/// system call, the `ManifestError` of an unreadable manifest).
///
/// A struct with an open set of codes, as NIOFileSystem's `FileSystemError`, rather than an enum: a new code
/// does not break a caller's exhaustive `switch`. Match on the code:
///
/// ```swift
/// do { … } catch let error as StoreError where error.code == .notCached { … }
/// ```
///
/// The static functions named after each code build the errors the store throws; two errors are equal when
/// their code, object, path, message and cause are.
public struct StoreError: Error, Sendable, Equatable, CustomStringConvertible {
  /// What kind of failure.
  public var code: Code
  /// The object concerned, if one is.
  public var objectID: ObjectID?
  /// The file or directory concerned, if one is.
  public var path: FilePath?
  /// One line for a person: the object or path, the operation and the cause (as the commands print it).
  public var message: String
  /// The `errno` of the failed system call (code `io`).
  public var errno: Errno?
  /// The bytes that are not cached (code `notCached`).
  public var missing: [Range<Int64>] = []
  /// The chunk that failed its CRC (code `corruptChunk`).
  public var chunk: Int?
  /// The underlying error, if any (the `ManifestError` of code `corruptManifest`).
  public var cause: (any Error & Sendable)?

  /// An error of `code` with its `message`; the static functions named after the codes fill in the rest.
  public init(
    _ code: Code, _ message: String, objectID: ObjectID? = nil, path: FilePath? = nil, errno: Errno? = nil,
    cause: (any Error & Sendable)? = nil
  ) {
    self.code = code
    self.message = message
    self.objectID = objectID
    self.path = path
    self.errno = errno
    self.cause = cause
  }

  /// `message`.
  public var description: String { message }

  /// Equal code, object, path, message, `errno`, missing ranges and cause (compared as text).
  public static func == (a: StoreError, b: StoreError) -> Bool {
    a.code == b.code && a.objectID == b.objectID && a.path == b.path && a.message == b.message
      && a.errno == b.errno && a.missing == b.missing && a.chunk == b.chunk
      && a.cause.map { String(describing: $0) } == b.cause.map { String(describing: $0) }
  }

  /// A system call (`operation`) failed on `path`.
  public static func io(operation: String, path: FilePath, errno: Errno) -> StoreError {
    StoreError(.io, "\(operation) failed on \(path): \(errno)", path: path, errno: errno)
  }
  /// The cache directory `path` does not exist, or (`empty`) is an empty directory: no cache there yet.
  public static func noSuchCache(path: FilePath, empty: Bool = false) -> StoreError {
    let what = empty ? "is empty: no cache there yet" : "does not exist"
    return StoreError(.noSuchCache, "\(path) \(what)", path: path)
  }
  /// `path` holds files but no `FORMAT` marker, or (`directory` false) is not a directory.
  public static func notACache(path: FilePath, directory: Bool = true) -> StoreError {
    StoreError(
      .notACache,
      "\(path) is not a MediaCache directory ("
        + (directory ? "no FORMAT marker, but not empty" : "not a directory") + "); refusing to use it",
      path: path)
  }
  /// `path/FORMAT` says `found`, which this build cannot read.
  public static func unsupportedFormat(path: FilePath, found: String) -> StoreError {
    StoreError(
      .unsupportedFormat,
      "\(path)/FORMAT says '\(found)', which this build cannot read (supports major version \(CacheFormat.major))",
      path: path)
  }
  /// Object `id` is open elsewhere.
  public static func busy(_ id: ObjectID) -> StoreError {
    StoreError(.busy, "object \(id) is in use by another process or handle", objectID: id)
  }
  /// Nothing of object `id` is cached.
  public static func notFound(_ id: ObjectID) -> StoreError {
    StoreError(.notFound, "object \(id) is not cached", objectID: id)
  }
  /// Bytes `missing` of object `id` are not cached.
  public static func notCached(_ id: ObjectID, missing: [Range<Int64>]) -> StoreError {
    var error = StoreError(
      .notCached,
      "object \(id) is missing bytes "
        + missing.prefix(4).map { "\($0.lowerBound)-\($0.upperBound - 1)" }.joined(separator: ",")
        + (missing.count > 4 ? ",…" : ""), objectID: id)
    error.missing = missing
    return error
  }
  /// Chunk `chunk` of object `id` (or a span of it) failed its CRC and was dropped.
  public static func corruptChunk(_ id: ObjectID, chunk: Int, expected: UInt32, actual: UInt32) -> StoreError
  {
    var error = StoreError(
      .corruptChunk,
      "object \(id) chunk \(chunk) failed its CRC (expected \(hex32(expected)), found \(hex32(actual))); dropped",
      objectID: id)
    error.chunk = chunk
    return error
  }
  /// The manifest of `id` at `path` cannot be read, because of `error`.
  public static func corruptManifest(_ id: ObjectID, path: FilePath, _ error: ManifestError) -> StoreError {
    StoreError(
      .corruptManifest, "manifest of \(id) at \(path) is unreadable: \(error)", objectID: id, path: path,
      cause: error)
  }
  /// `range` lies outside object `id` of `length`.
  public static func outOfBounds(_ id: ObjectID, range: Range<Int64>, length: Int64?) -> StoreError {
    StoreError(
      .outOfBounds,
      "range \(range.lowerBound)..<\(range.upperBound) is outside object \(id) (length \(length.map(String.init) ?? "unknown"))",
      objectID: id)
  }
  /// Object `id` has length `recorded`; `declared` differs.
  public static func lengthConflict(_ id: ObjectID, recorded: Int64, declared: Int64) -> StoreError {
    StoreError(
      .lengthConflict, "object \(id) has length \(recorded); cannot declare \(declared)", objectID: id)
  }
  /// Metadata `field` of `size` bytes is over `limit`.
  public static func fieldTooLarge(field: String, size: Int, limit: Int) -> StoreError {
    StoreError(.fieldTooLarge, "\(field) is \(size) bytes; the limit is \(limit)")
  }
  /// The data manager of `id` is closed.
  public static func closed(_ id: ObjectID) -> StoreError {
    StoreError(.closed, "the data manager of \(id) is closed", objectID: id)
  }
  /// The removal of `id` was called off.
  public static func kept(_ id: ObjectID) -> StoreError {
    StoreError(.kept, "object \(id) was kept (pinned since the decision to remove it)", objectID: id)
  }
  /// Object `id` moved from version `expected` to `current` during a write.
  public static func versionChanged(_ id: ObjectID, expected: UInt32, current: UInt32) -> StoreError {
    StoreError(
      .versionChanged,
      "object \(id) changed version (\(hex32(expected)) → \(hex32(current))) during the write", objectID: id)
  }
  /// A configuration value the cache does not support, and why.
  public static func invalidConfiguration(_ reason: String) -> StoreError {
    StoreError(.invalidConfiguration, "invalid configuration: \(reason)")
  }
  /// `group` cannot name a group, because of `reason`.
  public static func invalidGroup(_ group: String, reason: String) -> StoreError {
    StoreError(.invalidGroup, "invalid group name '\(group.prefix(80))': \(reason)")
  }
  /// `name` cannot name a namespace, because of `reason`.
  public static func invalidNamespace(_ name: String, reason: String) -> StoreError {
    StoreError(.invalidNamespace, "invalid namespace name '\(name.prefix(80))': \(reason)")
  }
  /// Namespace `name` is not configured.
  public static func noSuchNamespace(_ name: String) -> StoreError {
    StoreError(.noSuchNamespace, "namespace '\(name)' is not configured (Configuration.namespaces)")
  }
  /// `path` is a `found` where the layout keeps a `expected`.
  public static func unexpectedFileType(path: FilePath, expected: String, found: String) -> StoreError {
    StoreError(
      .unexpectedFileType,
      "\(path) is a \(found) where the cache keeps a \(expected); not followed or opened (remove it)",
      path: path)
  }
}

func hex32(_ value: UInt32) -> String {
  let digits = String(value, radix: 16)
  return String(repeating: "0", count: 8 - digits.count) + digits
}

extension StoreError {
  init(_ error: SystemCallError) {
    if error.syscall == "open" || error.syscall == "openat", error.errno == .tooManySymbolicLinkLevels {
      // `O_NOFOLLOW` met a symlink where the cache keeps a file.
      self = .unexpectedFileType(
        path: FilePath(error.path), expected: "regular file", found: FileType.symlink.rawValue)
      return
    }
    self = .io(operation: error.syscall, path: FilePath(error.path), errno: error.errno)
  }
}

/// Runs `body`, turning a failed system call into `StoreError.io`; other errors pass through.
@inline(__always)
func mapIO<T>(_ body: () throws -> T) throws -> T {
  do { return try body() } catch let error as SystemCallError { throw StoreError(error) }
}

extension StoreError {
  /// What kind of failure. New codes may be added: a `switch` over them outside this package needs an
  /// `@unknown default`.
  @nonexhaustive public enum Code: String, ErrorCode {
    /// A system call failed (`errno` says why).
    case io
    /// The cache directory does not exist (and the caller asked not to create it).
    case noSuchCache
    /// The directory exists and holds files but has no `FORMAT` marker: it is not a cache.
    case notACache
    /// The `FORMAT` marker names a layout this build cannot use.
    case unsupportedFormat
    /// The object is open in some process; it was left in place. It can also be met for a moment right after the
    /// last handle of this process closed, if the process spawns children meanwhile: on Linux a child holds copies
    /// of the parent's descriptors, and so their locks, until its `exec`. Retry later.
    case busy
    /// No bytes are cached for the object.
    case notFound
    /// Some requested bytes are not cached (`missing` lists them).
    case notCached
    /// A chunk's (or span's) bytes do not match the CRC its manifest recorded; it was dropped.
    case corruptChunk
    /// The object's manifest cannot be read (`cause` is the `ManifestError`); the object is treated as a miss.
    case corruptManifest
    /// A write or read reaches past the object's known length, or starts before zero.
    case outOfBounds
    /// A declared length differs from the one already recorded.
    case lengthConflict
    /// A metadata field is larger than the manifest allows.
    case fieldTooLarge
    /// The data manager was closed.
    case closed
    /// A removal was called off because the object's manifest, re-read under the lock, says to keep it.
    case kept
    /// The object moved to another version (a `reset`) since the writer started.
    case versionChanged
    /// A configuration value is outside what the cache supports.
    case invalidConfiguration
    /// A group name that cannot be used: empty, or with a control character (an over-long one is
    /// `fieldTooLarge`).
    case invalidGroup
    /// A namespace name that cannot be used (empty, over 64 bytes, or other characters than `a-z0-9._-`).
    case invalidNamespace
    /// A namespace the cache's configuration does not list.
    case noSuchNamespace
    /// Something other than what the layout puts there (a symlink, FIFO or directory where a file or shard
    /// directory should be): neither followed nor opened; the object is unusable until it is removed.
    case unexpectedFileType
  }
}

extension ManifestError {
  /// What kind of failure. New codes may be added: a `switch` over them outside this package needs an
  /// `@unknown default`.
  @nonexhaustive public enum Code: String, ErrorCode {
    /// Fewer bytes than the smallest valid manifest, or than the fields it declares need.
    case truncated
    /// The first four bytes are not `MCMF`.
    case badMagic
    /// A major version this build cannot read.
    case unsupportedVersion
    /// The trailing CRC-32 does not match the bytes before it.
    case checksumMismatch
    /// A field holds a value outside what the format allows.
    case invalidField
    /// The manifest belongs to another object than the path it was read from.
    case objectIDMismatch
    /// Bytes left over after the last field.
    case trailingBytes
  }
}
