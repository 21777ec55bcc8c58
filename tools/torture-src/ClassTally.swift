import Synchronization

/// Thread-safe counters and failures of one fault class.
final class ClassTally: Sendable {
  let name: String
  private struct State {
    var trials = 0
    var faults = 0
    var bytesVerified: Int64 = 0
    var failures: [String] = []
    var counters: [String: Int64] = [:]
  }
  private let state = Mutex(State())

  init(name: String) { self.name = name }

  func trialDone() { state.withLock { $0.trials += 1 } }
  func fault(_ count: Int = 1) { state.withLock { $0.faults += count } }
  func verified(_ bytes: Int64) { state.withLock { $0.bytesVerified += bytes } }
  func count(_ key: String, _ amount: Int64 = 1) { state.withLock { $0.counters[key, default: 0] += amount } }
  func fail(_ message: String) {
    state.withLock { $0.failures.append(message) }
    log("FAIL [\(name)] \(message)")
  }

  var trials: Int { state.withLock { $0.trials } }
  var faults: Int { state.withLock { $0.faults } }
  var bytesVerified: Int64 { state.withLock { $0.bytesVerified } }
  var failures: [String] { state.withLock { $0.failures } }
  var counters: [String: Int64] { state.withLock { $0.counters } }
}
