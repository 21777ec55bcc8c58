/// One thing `CacheChecker` found: where, what is wrong, what was expected and what was found, and what was
/// done about it.
public struct CheckFinding: Sendable, Equatable {
  /// What kind of problem.
  /// The raw value is the `kind` string of `cache-fsck --json` (docs/REPORTS.md).
  public enum Kind: String, Sendable, Codable, CaseIterable {
    /// The root has objects but no `FORMAT` marker. A repair writes the marker.
    case missingFormatMarker = "missing-format"
    /// The `FORMAT` marker's text cannot be parsed. A repair rewrites it.
    case badFormatMarker = "bad-format"
    /// A file or directory the layout has no place for (in the root, `objects/`, a shard or `tmp/`): a
    /// warning; never deleted.
    case unknownEntry = "unknown-entry"
    /// A directory under `objects/` whose name is not two lowercase hex digits: a warning; left alone.
    case badShardName = "bad-shard-name"
    /// An object's file stored under another shard than its id's. A repair moves it where it belongs.
    case misplacedFile = "misplaced"
    /// A manifest that names another object than its file name says. A repair removes the object.
    case hashPathMismatch = "hash-path-mismatch"
    /// A manifest that does not start with the magic bytes `MCMF`. A repair removes the object.
    case badMagic = "bad-magic"
    /// A manifest of a major version this build does not read. A repair removes the object.
    case unsupportedManifestVersion = "unsupported-version"
    /// A manifest whose own CRC-32 does not match its bytes. A repair removes the object.
    case manifestChecksum = "bad-manifest-crc"
    /// A manifest shorter than its header says, or one that cannot be read at all. A repair removes the object.
    case truncatedManifest = "truncated-manifest"
    /// A manifest that decodes but is inconsistent (see the message). A repair removes the object.
    case invalidManifest = "invalid-manifest"
    /// A manifest without its data file. A repair removes the manifest.
    case missingData = "missing-data"
    /// A data file without a manifest (a writer that died before its first commit, or a removal cut short). A
    /// repair removes the data file.
    case orphanData = "orphan-data"
    /// A data file shorter than the chunks its manifest lists. A repair drops those chunks from the manifest.
    case shortData = "short-data"
    /// A listed chunk whose bytes fail their CRC-32 (`expected` and `found` are the two CRCs in hex). A repair
    /// drops the chunk from the manifest, so it is fetched again.
    case chunkChecksum = "chunk-crc"
    /// A staging file in `tmp/` older than `CacheChecker.Options.tmpGracePeriod`. A repair removes it.
    case staleTemporaryFile = "stale-tmp"
    /// An object in use by another process. Kept for the report schema: the checker counts such objects in
    /// `CheckTotals.busy` and reports none with this kind.
    case busy = "busy"
    /// A symlink, FIFO, device or file where the layout has a directory (`objects/`, `tmp/`, a shard) or a
    /// regular file (a data file, a manifest). Never followed, opened or deleted: left for a person to remove.
    case wrongType = "wrong-type"
    /// A file the checker may not open (wrong owner or mode). Never deleted or chmod-ed.
    case unreadable = "unreadable"
    /// An entry of the group index (`groups/gg/<group>/<id>`) whose object is gone or is not in that group (a
    /// crash between the entry and the manifest, or a removal cut short). A repair removes the entry.
    case staleGroupEntry = "stale-group-entry"
    /// An object whose manifest names a group the index has no entry for, so `remove(group:)` would miss it. A
    /// repair writes the entry.
    case missingGroupEntry = "missing-group-entry"
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
  /// What is wrong.
  public var kind: Kind
  /// Whether it is an error (affects the exit status until repaired) or a warning.
  public var severity: Severity
  /// One sentence for a person.
  public var message: String
  /// What the checker expected to find there, as text (a file name, a CRC in hex, a size); nil when the
  /// kind has no such value.
  @NullWhenAbsent public var expected: String? = nil
  /// What it found instead, in the same form as `expected`; nil when the kind has no such value.
  @NullWhenAbsent public var found: String? = nil
  /// The chunk concerned (its index, from 0), for chunk findings.
  @NullWhenAbsent public var chunk: Int? = nil
  /// What was done about it: `.none` in a check.
  public var action: Action = .none

  /// Whether the finding still stands after the run.
  public var isUncorrectedError: Bool { severity == .error && action != .repaired }

  /// What identifies a finding when runs are compared: where, what, how bad and what was done, without the
  /// sentence and the expected/found texts. The fixtures' `expected.json` lists these.
  public struct Identity: Sendable, Hashable, Codable, Comparable, CustomStringConvertible {
    /// The finding's path, relative to the cache root.
    public var path: String
    /// The finding's kind.
    public var kind: Kind
    /// The finding's severity.
    public var severity: Severity
    /// The chunk index, for chunk findings.
    @NullWhenAbsent public var chunk: Int? = nil
    /// What was done.
    public var action: Action

    /// An identity as a fixture lists it; by default an error about no particular chunk with nothing done.
    public init(
      path: String, kind: Kind, severity: Severity = .error, chunk: Int? = nil, action: Action = .none
    ) {
      self.path = path
      self.kind = kind
      self.severity = severity
      self.chunk = chunk
      self.action = action
    }

    /// `PATH KIND SEVERITY [chunk N] ACTION` on one line, with the JSON names of kind, severity and action.
    public var description: String {
      "\(path) \(kind.rawValue) \(severity.rawValue)\(chunk.map { " chunk \($0)" } ?? "") \(action.rawValue)"
    }

    /// Orders identities by their `description`, so sorted lists compare line by line.
    public static func < (lhs: Identity, rhs: Identity) -> Bool { lhs.description < rhs.description }
  }

  /// The finding's identity (see `Identity`).
  public var identity: Identity {
    Identity(path: path, kind: kind, severity: severity, chunk: chunk, action: action)
  }
}

/// In reports every key is present; `expected`, `found` and `chunk` are null when they do not apply. Decoding
/// throws `DecodingError` when a non-optional key is missing or a kind, severity or action is unknown.
extension CheckFinding: Codable {}

/// Totals of a check.
public struct CheckTotals: Sendable, Equatable, Codable {
  /// Objects with a readable manifest (an orphan data file or a damaged manifest is a finding, not an object).
  public var objects = 0
  /// Objects whose manifest says every chunk is present.
  public var complete = 0
  /// Objects with a readable manifest that lists some chunks but not all.
  public var partial = 0
  /// Objects whose manifest is pinned.
  public var pinned = 0
  /// Objects another process had open: their metadata was checked, their chunks not read.
  public var busy = 0
  /// Bytes on disk: allocated data blocks plus manifests.
  public var bytes: Int64 = 0
  /// Chunks whose CRC-32 was verified against their bytes (0 in a fast check).
  public var chunksVerified = 0
  /// Bytes of those chunks, and of the spans (bytes of incomplete chunks) checked with them.
  public var bytesVerified: Int64 = 0
}

/// What a check (or repair) found and did.
public struct CheckReport: Sendable, Equatable {
  /// Everything found, warnings included, in the order the checker came to it: the root, the walk of
  /// `objects/`, `tmp/`, then each object in id order.
  public var findings: [CheckFinding] = []
  /// What the check counted.
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

  /// Decodes `findings`, `totals` and `cancelled`; the derived keys are ignored. Throws `DecodingError` when
  /// one of the three is missing or malformed.
  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    findings = try container.decode([CheckFinding].self, forKey: .findings)
    totals = try container.decode(CheckTotals.self, forKey: .totals)
    cancelled = try container.decode(Bool.self, forKey: .cancelled)
  }

  /// Encodes `findings`, `totals`, `cancelled`, `corrected` and `uncorrected`.
  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(findings, forKey: .findings)
    try container.encode(totals, forKey: .totals)
    try container.encode(cancelled, forKey: .cancelled)
    try container.encode(corrected, forKey: .corrected)
    try container.encode(uncorrected, forKey: .uncorrected)
  }
}
