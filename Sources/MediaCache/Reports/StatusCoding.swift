extension MediaCache.Status {
  /// `none`, `partial` or `complete`.
  public var stateName: String {
    switch self {
    case .none: "none"
    case .partial: "partial"
    case .complete: "complete"
    }
  }

  /// Content bytes cached (0 for `none`).
  public var cachedBytes: Int64 {
    switch self {
    case .none: 0
    case .partial(let cached, _, _): cached
    case .complete(let length): length
    }
  }

  /// The object's length, when known.
  public var length: Int64? {
    switch self {
    case .none: nil
    case .partial(_, let length, _): length
    case .complete(let length): length
    }
  }

  /// The cached byte ranges, half-open and sorted.
  public var ranges: [Range<Int64>] {
    switch self {
    case .none: []
    case .partial(_, _, let ranges): ranges
    case .complete(let length): length > 0 ? [0..<length] : []
    }
  }
}

/// `mediacache status --json` (docs/REPORTS.md): `state`, `cachedBytes`, `length` (null when unknown) and
/// `ranges` as `[start, endExclusive]` pairs.
extension MediaCache.Status: Codable {
  private enum CodingKeys: String, CodingKey {
    case state, cachedBytes, length, ranges
  }

  /// Decodes the `mediacache status --json` object. Throws `DecodingError` for a missing key, a `state` other
  /// than `none`, `partial` or `complete`, or a `complete` state without a `length`.
  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    let state = try container.decode(String.self, forKey: .state)
    let cached = try container.decode(Int64.self, forKey: .cachedBytes)
    let length = try container.decodeIfPresent(Int64.self, forKey: .length)
    let ranges = try container.decode([Range<Int64>].self, forKey: .ranges)
    switch state {
    case "none": self = .none
    case "complete":
      guard let length else {
        throw DecodingError.dataCorruptedError(
          forKey: .length, in: container, debugDescription: "a complete object has a length")
      }
      self = .complete(length: length)
    case "partial": self = .partial(cachedBytes: cached, length: length, ranges: ranges)
    default:
      throw DecodingError.dataCorruptedError(
        forKey: .state, in: container, debugDescription: "'\(state)' is not none, partial or complete")
    }
  }

  /// Encodes all four keys; `length` is `null` when unknown, and a `complete` object has one range, `[0, length]`
  /// (none when it is empty).
  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(stateName, forKey: .state)
    try container.encode(cachedBytes, forKey: .cachedBytes)
    try container.encode(length, forKey: .length)
    try container.encode(ranges, forKey: .ranges)
  }
}
