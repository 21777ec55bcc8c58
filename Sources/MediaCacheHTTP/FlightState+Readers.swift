import NIOCore

/// What a reader takes from a flight: the next bytes for its position, from memory, the cache or the end.
extension FlightState {
  /// The next bytes for a reader at `position` (at most `limit`).
  func next(from position: Int64, limit: Int) -> Next {
    if position < bufferStart { return .piece(.disk) }
    if position < received { return .piece(.memory(slices(from: position, limit: limit))) }
    if let end, position >= end { return .piece(.end) }
    switch outcome {
    case .failure(let error): return .fail(error)
    case .success: return .piece(.end)
    case nil: return .wait
    }
  }

  /// The bytes held in memory from `position` on (at most `limit`), or nil when the position is not among them.
  /// Never waits: a reader whose bytes the cache shows takes them here rather than reading back what the flight
  /// wrote a moment ago (a small miss's whole body, written before the reader's first look or as it looks).
  func inMemory(from position: Int64, limit: Int) -> [ByteBuffer]? {
    guard position >= bufferStart, position < received, limit > 0 else { return nil }
    return slices(from: position, limit: limit)
  }

  /// Whether the byte at `position` was written to the cache by this flight (`written`: how far the writer has
  /// got) and is on its way to memory: the writer hands every byte it wrote over within
  /// `BodyWriter.maxBatchDelay`, at once while a reader is blocked. Not while the hand-over lags by more than
  /// `comingLag` (an origin's event loop behind on a busy machine): then a reader reads the cache rather than
  /// wait for it.
  func isComing(_ position: Int64, written: Int64) -> Bool {
    isLive && position >= bufferStart && position >= received && position < written
      && written - received <= Self.comingLag
  }

  /// See `isComing`: two of the writer's batches (`BodyWriter` hands bytes over by 256 KiB at the most).
  static let comingLag: Int64 = 512 << 10

  /// Up to `limit` bytes of `parts` from `position` (between `bufferStart` and `received`), sharing storage.
  private func slices(from position: Int64, limit: Int) -> [ByteBuffer] {
    var skip = Int(position - bufferStart)
    var wanted = limit
    var result: [ByteBuffer] = []
    for part in parts where wanted > 0 {
      let count = part.readableBytes
      if skip >= count {
        skip -= count
        continue
      }
      let take = min(count - skip, wanted)
      result.append(part.getSlice(at: part.readerIndex + skip, length: take)!)
      wanted -= take
      skip = 0
    }
    return result
  }
}
