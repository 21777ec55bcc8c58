import SystemPackage

/// Why a manifest's bytes were refused. Each case says where in the manifest and what was found.
public enum ManifestError: Error, Sendable, Equatable, CustomStringConvertible {
  /// Fewer bytes than the smallest valid manifest, or than the fields it declares need.
  case truncated(needed: Int, available: Int, field: String)
  /// The first four bytes are not `MCMF`.
  case badMagic(found: [UInt8])
  /// A major version this build cannot read.
  case unsupportedVersion(major: UInt8, minor: UInt8)
  /// The trailing CRC-32 does not match the bytes before it.
  case checksumMismatch(stored: UInt32, computed: UInt32)
  /// A field holds a value outside what the format allows.
  case invalidField(name: String, reason: String)
  /// The manifest belongs to another object than the path it was read from.
  case objectIDMismatch(expected: ObjectID, found: ObjectID)
  /// Bytes left over after the last field.
  case trailingBytes(count: Int)

  /// One line for a person: what is wrong and where, with the values found (as `cache-fsck` prints it).
  public var description: String {
    switch self {
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

/// A failure of the on-disk store. Each case carries the object or path and what a person needs to act on it.
public enum StoreError: Error, Sendable, Equatable, CustomStringConvertible {
  /// A system call failed.
  case io(operation: String, path: String, errno: Errno)
  /// The cache directory does not exist (and the caller asked not to create it).
  case noSuchCache(path: String)
  /// The directory exists and holds files but has no `FORMAT` marker: it is not a cache.
  case notACache(path: String)
  /// The `FORMAT` marker names a layout this build cannot use.
  case unsupportedFormat(path: String, found: String)
  /// The object is open in some process; it was left in place.
  case busy(ObjectID)
  /// No bytes are cached for the object.
  case notFound(ObjectID)
  /// Some requested bytes are not cached.
  case notCached(ObjectID, missing: [Range<Int64>])
  /// A chunk's bytes do not match the CRC its manifest recorded; the chunk was dropped.
  case corruptChunk(ObjectID, chunk: Int, expected: UInt32, actual: UInt32)
  /// The object's manifest cannot be read; the object is treated as a miss.
  case corruptManifest(ObjectID, path: String, ManifestError)
  /// A write or read reaches past the object's known length, or starts before zero.
  case outOfBounds(ObjectID, range: Range<Int64>, length: Int64?)
  /// A declared length differs from the one already recorded.
  case lengthConflict(ObjectID, recorded: Int64, declared: Int64)
  /// A metadata field is larger than the manifest allows.
  case fieldTooLarge(field: String, size: Int, limit: Int)
  /// The data manager was closed.
  case closed(ObjectID)
  /// A removal was called off because the object's manifest, re-read under the lock, says to keep it.
  case kept(ObjectID)
  /// The object moved to another version (a `reset`) since the writer started.
  case versionChanged(ObjectID, expected: UInt32, current: UInt32)
  /// A configuration value is outside what the cache supports.
  case invalidConfiguration(String)
  /// Something other than what the layout puts there: a symlink or a file where a shard directory should be, a
  /// symlink, FIFO or directory where a data file or manifest should be. The store neither follows nor opens it
  /// (a symlink may lead out of the cache, opening a FIFO blocks); the object is unusable until it is removed.
  case unexpectedFileType(path: String, expected: String, found: String)

  /// One line for a person: the object or path, the operation and the cause (as the commands print it).
  public var description: String {
    switch self {
    case .io(let operation, let path, let errno): "\(operation) failed on \(path): \(errno)"
    case .noSuchCache(let path): "\(path) does not exist"
    case .notACache(let path):
      "\(path) is not a MediaCache directory (no FORMAT marker, but not empty); refusing to use it"
    case .unsupportedFormat(let path, let found):
      "\(path)/FORMAT says '\(found)', which this build cannot read (supports major version \(CacheFormat.major))"
    case .busy(let id): "object \(id) is in use by another process or handle"
    case .notFound(let id): "object \(id) is not cached"
    case .notCached(let id, let missing):
      "object \(id) is missing bytes "
        + missing.prefix(4).map { "\($0.lowerBound)-\($0.upperBound - 1)" }.joined(separator: ",")
        + (missing.count > 4 ? ",…" : "")
    case .corruptChunk(let id, let chunk, let expected, let actual):
      "object \(id) chunk \(chunk) failed its CRC (expected \(hex32(expected)), found \(hex32(actual))); dropped"
    case .corruptManifest(let id, let path, let error): "manifest of \(id) at \(path) is unreadable: \(error)"
    case .outOfBounds(let id, let range, let length):
      "range \(range.lowerBound)..<\(range.upperBound) is outside object \(id) (length \(length.map(String.init) ?? "unknown"))"
    case .lengthConflict(let id, let recorded, let declared):
      "object \(id) has length \(recorded); cannot declare \(declared)"
    case .fieldTooLarge(let field, let size, let limit): "\(field) is \(size) bytes; the limit is \(limit)"
    case .closed(let id): "the data manager of \(id) is closed"
    case .kept(let id): "object \(id) was kept (pinned since the decision to remove it)"
    case .versionChanged(let id, let expected, let current):
      "object \(id) changed version (\(hex32(expected)) → \(hex32(current))) during the write"
    case .invalidConfiguration(let reason): "invalid configuration: \(reason)"
    case .unexpectedFileType(let path, let expected, let found):
      "\(path) is a \(found) where the cache keeps a \(expected); not followed or opened (remove it)"
    }
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
      self = .unexpectedFileType(path: error.path, expected: "regular file", found: FileType.symlink.rawValue)
      return
    }
    self = .io(operation: error.syscall, path: error.path, errno: error.errno)
  }
}

/// Runs `body`, turning a failed system call into `StoreError.io`; other errors pass through.
@inline(__always)
func mapIO<T>(_ body: () throws -> T) throws -> T {
  do { return try body() } catch let error as SystemCallError { throw StoreError(error) }
}
