/// What a size-limited compaction pass keeps of an idle object when it cuts tails (`CompactionPolicy.keepHeads`):
/// the ranges a planner finds a player reads to start the object (for a video, those of its first seconds:
/// `HeadWindow.mediaStart` in MediaCacheStreaming, which keeps an MP4's `moov` wherever it lies), and the
/// first `bytes` where there is no planner or it finds nothing. Kept ranges are rounded out to whole chunks.
public struct HeadWindow: Sendable, Equatable, CustomStringConvertible {
  /// Finds the ranges to keep of one object from its cached bytes; nil keeps the first `bytes` instead.
  public typealias Planner = @Sendable (CachedObjectBytes) -> [Range<Int64>]?

  /// The first bytes kept where the planner gives no ranges (or there is none).
  public var bytes: Int64
  /// Finds the ranges to keep (nil: the first `bytes`, always).
  public var planner: Planner?
  /// What the window is, for a person (for example "5 s of media, else 2.5 MB").
  public var description: String

  /// A window of `bytes`, with `planner` where given; `description` names it in logs and help.
  public init(bytes: Int64, description: String? = nil, planner: Planner? = nil) {
    self.bytes = max(0, bytes)
    self.planner = planner
    self.description = description ?? "\(max(0, bytes)) bytes"
  }

  /// The first `count` bytes of every object.
  public static func bytes(_ count: Int64) -> HeadWindow { HeadWindow(bytes: count) }

  /// Equal when they keep the same bytes and have the same description (planners cannot be compared).
  public static func == (lhs: HeadWindow, rhs: HeadWindow) -> Bool {
    lhs.bytes == rhs.bytes && lhs.description == rhs.description
      && (lhs.planner == nil) == (rhs.planner == nil)
  }

  /// The ranges to keep of `object`: the planner's (clipped to the object, empty ones dropped), or the first
  /// `bytes`.
  func ranges(for object: CachedObjectBytes) -> [Range<Int64>] {
    let end = object.contentLength ?? .max
    if let planned = planner?(object) {
      let clipped = planned.map { max(0, $0.lowerBound)..<min(end, $0.upperBound) }.filter { !$0.isEmpty }
      if !clipped.isEmpty { return clipped }
    }
    return [0..<min(end, bytes)]
  }
}

/// An idle object's cached bytes as a `HeadWindow.Planner` sees them, read under the cut's exclusive lock.
/// Reads are not verified against the chunks' CRCs (a planner reads headers and indexes; a damaged one gives a
/// plan that fails or keeps other bytes, never a wrong byte served: reads of the kept chunks still verify).
public struct CachedObjectBytes {
  /// The object's id.
  public let id: ObjectID
  /// Its length, where known.
  public let contentLength: Int64?
  /// Its content type, where recorded.
  public let contentType: String?
  let manifest: Manifest
  let file: SystemFile

  init(manifest: Manifest, file: SystemFile) {
    self.id = manifest.objectID
    self.contentLength = manifest.contentLength
    self.contentType = manifest.contentType
    self.manifest = manifest
    self.file = file
  }

  /// The bytes of `range` (clipped to the object's length), or nil when any of them is not cached or the read
  /// fails. At most `maxRead` bytes are read at once.
  public func read(_ range: Range<Int64>) -> [UInt8]? {
    let end = min(range.upperBound, contentLength ?? range.upperBound)
    guard range.lowerBound >= 0, end > range.lowerBound, end - range.lowerBound <= Self.maxRead else {
      return nil
    }
    var position = range.lowerBound
    while position < end {
      let run = manifest.cachedRun(at: position)
      if run <= 0 { return nil }
      position += run
    }
    var bytes = [UInt8](repeating: 0, count: Int(end - range.lowerBound))
    let count = try? bytes.withUnsafeMutableBytes { try file.read(into: $0, at: range.lowerBound) }
    return count == bytes.count ? bytes : nil
  }

  /// The largest single read (an MP4's `moov` may be tens of MiB; nothing a planner needs is larger).
  public static let maxRead: Int64 = 64 << 20
}
