extension Duration {
  /// The duration in seconds, as a `Double` (for arithmetic with `Date` and file times, and for messages).
  package var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
