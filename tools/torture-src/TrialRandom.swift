import MediaCacheTestSupport

/// Every random choice of a trial comes from a `SeededRandom` (SplitMix64, shared with the tests), seeded from
/// `--seed`, the class and the trial number, so a trial makes the same choices (sizes, kill delays, damage) when
/// run again.
extension SeededRandom {
  /// The seed of trial `trial` of class `name` under run seed `seed`.
  static func trialSeed(_ seed: UInt64, _ name: String, _ trial: Int) -> UInt64 {
    var hash: UInt64 = 0xCBF2_9CE4_8422_2325
    for byte in name.utf8 {
      hash ^= UInt64(byte)
      hash &*= 0x0000_0100_0000_01B3
    }
    var mixer = SeededRandom(seed: seed ^ hash ^ (UInt64(trial) &* 0xD6E8_FEB8_6659_FD93))
    return mixer.next()
  }

  /// A lowercase hex token of `count` characters (object names that no byte of the origin will contain).
  mutating func token(_ count: Int = 12) -> String {
    let digits = Array("0123456789abcdef")
    return String((0..<count).map { _ in digits[Int(next() & 15)] })
  }

  /// Seconds, uniform in `range`.
  mutating func seconds(_ range: ClosedRange<Double>) -> Double { Double.random(in: range, using: &self) }
}
