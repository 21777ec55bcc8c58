import Foundation

/// SplitMix64: a tiny, fast, seedable generator, so that test data and a trial's random choices are the same on
/// every run and a failure reproduces from its seed.
public struct SeededRandom: RandomNumberGenerator, Sendable {
  private var state: UInt64

  /// A generator whose sequence is a function of `seed` alone.
  public init(seed: UInt64) { state = seed }

  /// The next value of the SplitMix64 sequence.
  public mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}

/// `count` pseudo-random bytes, the same for the same seed.
public func randomBytes(count: Int, seed: UInt64) -> Data {
  var rng = SeededRandom(seed: seed)
  var bytes = [UInt8](repeating: 0, count: count)
  var index = 0
  while index < count {
    let word = rng.next()
    for shift in stride(from: 0, to: 64, by: 8) where index < count {
      bytes[index] = UInt8(truncatingIfNeeded: word >> UInt64(shift))
      index += 1
    }
  }
  return Data(bytes)
}
