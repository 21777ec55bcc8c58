/// One thing `CacheChecker` found: where, what is wrong, what was expected and what was found, and what was
/// done about it.
public struct CheckFinding: Sendable, Equatable {
  /// What kind of problem.
  public enum Kind: String, Sendable, Codable, CaseIterable {
    case missingFormatMarker = "missing-format"
    case badFormatMarker = "bad-format"
    case unknownEntry = "unknown-entry"
    case badShardName = "bad-shard-name"
    case misplacedFile = "misplaced"
    case hashPathMismatch = "hash-path-mismatch"
    case badMagic = "bad-magic"
    case unsupportedManifestVersion = "unsupported-version"
    case manifestChecksum = "bad-manifest-crc"
    case truncatedManifest = "truncated-manifest"
    case invalidManifest = "invalid-manifest"
    case missingData = "missing-data"
    case orphanData = "orphan-data"
    case shortData = "short-data"
    case chunkChecksum = "chunk-crc"
    case staleTemporaryFile = "stale-tmp"
    case busy = "busy"
    /// A symlink, FIFO, device or file where the layout has a directory (`objects/`, `tmp/`, a shard) or a
    /// regular file (a data file, a manifest). Never followed, opened or deleted: left for a person to remove.
    case wrongType = "wrong-type"
    /// A file the checker may not open (wrong owner or mode). Never deleted or chmod-ed.
    case unreadable = "unreadable"
  }

  /// How much it matters.
  public enum Severity: String, Sendable, Codable {
    /// Reported, never changed, does not affect the exit status (unknown files, busy objects in a check).
    case warning
    /// Wrong: counts as an error until repaired.
    case error
  }

  /// What was done.
  public enum Action: String, Sendable, Codable {
    /// Nothing (a check, or a warning).
    case none
    /// Fixed by `--repair`.
    case repaired
    /// Needed a repair, but the object is in use by another process: left as it is.
    case skippedBusy = "skipped-busy"
    /// Needed a repair that could not be made (see the message).
    case failed
  }

  /// The path relative to the cache root.
  public var path: String
  public var kind: Kind
  public var severity: Severity
  /// One sentence for a person.
  public var message: String
  public var expected: String?
  public var found: String?
  /// The chunk concerned, for chunk findings.
  public var chunk: Int?
  public var action: Action = .none

  /// Whether the finding still stands after the run.
  public var isUncorrectedError: Bool { severity == .error && action != .repaired }

  /// What identifies a finding when runs are compared: where, what, how bad and what was done, without the
  /// sentence and the expected/found texts. The fixtures' `expected.json` lists these.
  public struct Identity: Sendable, Hashable, Codable, Comparable, CustomStringConvertible {
    public var path: String
    public var kind: Kind
    public var severity: Severity
    public var chunk: Int?
    public var action: Action

    public init(
      path: String, kind: Kind, severity: Severity = .error, chunk: Int? = nil, action: Action = .none
    ) {
      self.path = path
      self.kind = kind
      self.severity = severity
      self.chunk = chunk
      self.action = action
    }

    /// `chunk` is written as null when absent, as in the report.
    public func encode(to encoder: any Encoder) throws {
      var container = encoder.container(keyedBy: CodingKeys.self)
      try container.encode(path, forKey: .path)
      try container.encode(kind, forKey: .kind)
      try container.encode(severity, forKey: .severity)
      try container.encode(chunk, forKey: .chunk)
      try container.encode(action, forKey: .action)
    }

    public var description: String {
      "\(path) \(kind.rawValue) \(severity.rawValue)\(chunk.map { " chunk \($0)" } ?? "") \(action.rawValue)"
    }

    public static func < (lhs: Identity, rhs: Identity) -> Bool { lhs.description < rhs.description }
  }

  /// The finding's identity (see `Identity`).
  public var identity: Identity {
    Identity(path: path, kind: kind, severity: severity, chunk: chunk, action: action)
  }
}

/// In reports every key is present; `expected`, `found` and `chunk` are null when they do not apply.
extension CheckFinding: Codable {
  private enum CodingKeys: String, CodingKey {
    case path, kind, severity, message, expected, found, chunk, action
  }

  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    path = try container.decode(String.self, forKey: .path)
    kind = try container.decode(Kind.self, forKey: .kind)
    severity = try container.decode(Severity.self, forKey: .severity)
    message = try container.decode(String.self, forKey: .message)
    expected = try container.decodeIfPresent(String.self, forKey: .expected)
    found = try container.decodeIfPresent(String.self, forKey: .found)
    chunk = try container.decodeIfPresent(Int.self, forKey: .chunk)
    action = try container.decode(Action.self, forKey: .action)
  }

  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(path, forKey: .path)
    try container.encode(kind, forKey: .kind)
    try container.encode(severity, forKey: .severity)
    try container.encode(message, forKey: .message)
    try container.encode(expected, forKey: .expected)
    try container.encode(found, forKey: .found)
    try container.encode(chunk, forKey: .chunk)
    try container.encode(action, forKey: .action)
  }
}

/// Totals of a check.
public struct CheckTotals: Sendable, Equatable, Codable {
  public var objects = 0
  public var complete = 0
  public var partial = 0
  public var pinned = 0
  public var busy = 0
  /// Bytes on disk: allocated data blocks plus manifests.
  public var bytes: Int64 = 0
  public var chunksVerified = 0
  public var bytesVerified: Int64 = 0
}

/// What a check (or repair) found and did.
public struct CheckReport: Sendable, Equatable {
  public var findings: [CheckFinding] = []
  public var totals = CheckTotals()
  /// Stopped early (SIGINT): findings cover only what was reached.
  public var cancelled = false

  /// Errors fixed.
  public var corrected: Int { findings.filter { $0.severity == .error && $0.action == .repaired }.count }
  /// Errors left.
  public var uncorrected: Int { findings.filter(\.isUncorrectedError).count }

  /// The e2fsck-style exit status: 1 errors corrected, 4 errors left, 32 cancelled (or-ed).
  public var exitStatus: Int32 {
    (corrected > 0 ? 1 : 0) | (uncorrected > 0 ? 4 : 0) | (cancelled ? 32 : 0)
  }
}

/// In reports: `findings`, `totals` and `cancelled`, plus the derived `corrected` and `uncorrected` (recomputed
/// from the findings when decoding).
extension CheckReport: Codable {
  private enum CodingKeys: String, CodingKey {
    case findings, totals, cancelled, corrected, uncorrected
  }

  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    findings = try container.decode([CheckFinding].self, forKey: .findings)
    totals = try container.decode(CheckTotals.self, forKey: .totals)
    cancelled = try container.decode(Bool.self, forKey: .cancelled)
  }

  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(findings, forKey: .findings)
    try container.encode(totals, forKey: .totals)
    try container.encode(cancelled, forKey: .cancelled)
    try container.encode(corrected, forKey: .corrected)
    try container.encode(uncorrected, forKey: .uncorrected)
  }
}
