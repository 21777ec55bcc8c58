import NIOCore

extension BodyWriter {
  /// Bytes received and not yet written past which the next body part waits.
  static let maxQueuedBytes = 1 << 20

  /// The longest bytes wait here for more to batch with.
  static let maxBatchDelay = TimeAmount.milliseconds(5)

  /// Ends a body early once the flight's run is complete (the error is not reported as a failure).
  struct StopReading: Error {}
}
