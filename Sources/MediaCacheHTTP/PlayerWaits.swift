import NIOCore
import Synchronization

/// The players (readers of foreground flights) of one `CachingReader` waiting for an origin's bytes now, and when
/// one last stopped waiting: background work that can wait (`Preloader`) does not start while they wait.
final class PlayerWaits: Sendable {
  private let waiting = Atomic<Int>(0)
  /// `NIODeadline` uptime nanoseconds of the last wait's end; 0: none yet.
  private let lastEnded = Atomic<UInt64>(0)

  /// Players waiting now.
  var count: Int { waiting.load(ordering: .relaxed) }

  func begin() { waiting.add(1, ordering: .relaxed) }

  func end() {
    lastEnded.store(NIODeadline.now().uptimeNanoseconds, ordering: .relaxed)
    waiting.subtract(1, ordering: .relaxed)
  }

  /// Whether a player waits now or stopped waiting less than `window` ago.
  func waited(within window: Duration) -> Bool {
    if count > 0 { return true }
    let ended = lastEnded.load(ordering: .relaxed)
    guard ended > 0 else { return false }
    let (seconds, attoseconds) = window.components
    let windowNanos = UInt64(max(0, seconds)) * 1_000_000_000 + UInt64(max(0, attoseconds)) / 1_000_000_000
    return NIODeadline.now().uptimeNanoseconds &- ended < windowNanos
  }
}
