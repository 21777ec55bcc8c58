extension FlightState {
  /// Whether a reader at `position` can be served soon: inside the run, and not more than two chunks ahead of
  /// what has arrived (`written`: how far the writer has got, ahead of `received`), or farther ahead if the
  /// flight's rate gets it there within `joinHorizon` — but never past the bound an abandoned flight settled
  /// for: its player went elsewhere, and joining there would fetch everything between, which nobody asked for.
  func canServe(_ position: Int64, written: Int64, now: ContinuousClock.Instant) -> Bool {
    // An abandoned flight's read-ahead bound goes away when a reader joins: it may serve up to its committed end.
    guard isLive, position >= start, committedEnd.map({ position < $0 }) ?? true else { return false }
    // Bytes before the in-memory chunk are complete in the cache: a reader that needs them from a flight
    // found them dropped, and must start a new request.
    guard position >= bufferStart else { return false }
    let arrived = max(received, written)
    let ahead = position - arrived
    if ahead <= 2 * chunkSize { return true }
    if abandonedEnd != nil, end.map({ position >= $0 }) ?? true { return false }
    guard let firstByte else { return false }
    let seconds = firstByte.instant.duration(to: now).seconds
    guard seconds >= 0.01, arrived > firstByte.offset else { return false }
    let rate = Double(arrived - firstByte.offset) / seconds
    return Double(ahead) / rate <= Self.joinHorizon
  }

  /// For a reader at `position` that the run covers but `canServe` turned down: how long until the flight has
  /// run `warmUp` since its first byte, if it has not yet (a player that seeks right after opening would
  /// otherwise start a new request just before a fast origin's response got there).
  func warmUpRemaining(for position: Int64, now: ContinuousClock.Instant) -> Duration? {
    guard isLive, position >= bufferStart, committedEnd.map({ position < $0 }) ?? true,
      abandonedEnd == nil || end.map({ position < $0 }) ?? false, let firstByte
    else { return nil }
    let age = firstByte.instant.duration(to: now)
    return age < Self.warmUp ? Self.warmUp - age : nil
  }
}
