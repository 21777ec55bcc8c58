import NIOCore
import Synchronization

/// The body parts of a response that arrive while its head is being checked on the I/O executor, left for that
/// same job to write once the head is reconciled (`BodyWriter`).
///
/// Without it, parts that come with the head (all of a small range's body, often) waited on the event loop
/// for the head's job to come back, and went out again in a second job: two trips between the event loop and
/// the executor before a reader saw the first byte. (AsyncHTTPClient hands the body over after the head, by a
/// hop between its event loops, so the writer submits the head's check with the first part, waiting for it at
/// most `BodyWriter.maxHeadCheckDelay`.) The event loop offers each part; the job, once the head is
/// reconciled, closes the mailbox and takes what was left in the same step, so a part is either taken by the
/// job or refused (and queued on the loop, written by the next job), never both or neither. Parts that arrive
/// while the job writes are not taken: the head and the first bytes reach the readers after one batch.
final class HeadCheckMailbox: Sendable {
  private let state = Mutex<(isOpen: Bool, parts: [ByteBuffer])>((true, []))

  /// On the event loop: leaves `part` for the job. False once the job has closed the mailbox: the caller
  /// queues the part itself.
  func offer(_ part: ByteBuffer) -> Bool {
    state.withLock { state in
      guard state.isOpen else { return false }
      state.parts.append(part)
      return true
    }
  }

  /// On the executor, once the head is checked: closes the mailbox and returns the parts left, in the order
  /// they were offered (the job writes them, or drops them when the head failed its check).
  func close() -> [ByteBuffer] {
    state.withLock { state in
      state.isOpen = false
      defer { state.parts = [] }
      return state.parts
    }
  }
}
