import MediaCache
import NIOCore
import Synchronization

/// Whether a response's first bytes (a miss's) may go to its readers while the I/O executor writes them
/// (`FlightState.deliverWhileWriting`): yes, but not for a while after such a write failed with an I/O error
/// (`StoreError.io`: a full or failing disk).
///
/// Without the pause, a reader that looks again after its flight failed, or a player that retries the response
/// the failure cut, would get the next first bytes handed over and again not written: one origin request and
/// one cut response per batch. Kept by the `CachingReader` for all its objects (a disk that fails fails them
/// all), not by an object's session, which closes as soon as its last reader has gone.
final class EarlyHandOver: Sendable {
  /// How long bytes are handed over only once written, after a write of bytes handed over before it failed.
  static let pause = TimeAmount.seconds(60)
  /// Uptime (`NIODeadline`, nanoseconds) until which the pause lasts.
  private let pausedUntil = Atomic<UInt64>(0)

  var isOn: Bool { NIODeadline.now().uptimeNanoseconds >= pausedUntil.load(ordering: .relaxed) }

  /// A write of bytes handed over before it failed with `error`: an I/O error starts the pause (another
  /// failure, such as a version change by another writer, says nothing about the disk). So does a failure to
  /// make a new object's data file, which that write makes (`ObjectDataFile`), except `EFBIG`: a length the
  /// file system cannot hold is the object's (an origin's claim), not the disk's, and must not let one origin
  /// pause the hand-over of every object.
  func writeFailed(_ error: any Error) {
    guard let error = error as? StoreError, error.code == .io, error.errno != .fileTooLarge else { return }
    pausedUntil.store((NIODeadline.now() + Self.pause).uptimeNanoseconds, ordering: .relaxed)
  }
}
