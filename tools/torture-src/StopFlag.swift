import Synchronization

/// A flag threads share (an `Atomic` cannot be captured by an escaping closure).
final class StopFlag: Sendable {
  private let value = Atomic<Bool>(false)
  var isSet: Bool { value.load(ordering: .relaxed) }
  func set() { value.store(true, ordering: .relaxed) }
}
