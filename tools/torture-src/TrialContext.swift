/// Where one trial runs and how to report its failures.
struct TrialContext: Sendable {
  let tally: ClassTally
  let trial: Int
  let seed: UInt64
  let directory: String
  let runSeed: UInt64

  func fail(_ message: String) {
    tally.fail(
      "trial \(trial) (trial seed \(String(seed, radix: 16))): \(message) "
        + "[reproduce: tools/torture --classes \(tally.name) --seed \(runSeed) --trials \(trial + 1) "
        + "--only-trial \(trial); files in \(directory)]")
  }
}
