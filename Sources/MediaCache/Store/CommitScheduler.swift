import Foundation
import Synchronization

/// When a writer's completed chunks are committed, and where: the batch policy, the background queue that
/// commits a batch while the writer goes on writing (at most one batch in flight per object), and the one-time
/// flush of the object's directory names before the first commit that lists chunks.
///
/// It decides and runs; the bookkeeping of what is pending stays with `ObjectWriter` and `ObjectView`.
final class CommitScheduler: Sendable {
  /// When pending chunks are committed.
  let policy: FileHandleAssetDataManager.CommitPolicy
  /// Entered while a background commit of this object is in flight.
  private let background = DispatchGroup()
  /// Durable mode: whether the shard directories have been flushed since the data file was opened. A file
  /// this process or another created may not have its name on disk yet, nor the shard directories made for
  /// it, and a manifest listing its chunks must not outlive them (power lost after the manifest's rename but
  /// before those names reached the disk). So the first commit that adds chunks flushes objects/ab/cd,
  /// objects/ab and objects first; later ones need not.
  private let nameSynced = Atomic<Bool>(false)

  /// Where batches due while writing are committed (shared by every object).
  private static let queue = DispatchQueue(label: "MediaCache.commit", qos: .utility, attributes: .concurrent)

  init(policy: FileHandleAssetDataManager.CommitPolicy) {
    self.policy = policy
  }

  /// Whether a batch is due: enough bytes of completed chunks, or anything pending for longer than the
  /// interval.
  func isDue(uncommittedBytes: Int64, pendingIsEmpty: Bool, lastCommit: Double, now: Double) -> Bool {
    uncommittedBytes >= policy.bytes || (!pendingIsEmpty && now - lastCommit >= policy.interval.seconds)
  }

  /// Whether a writer with this backlog, while a batch is in flight, must wait for it.
  func mustWait(uncommittedBytes: Int64) -> Bool { uncommittedBytes >= policy.maxBacklog }

  /// Runs `job` on the background queue, counted until it returns.
  func runInBackground(_ job: @escaping @Sendable () -> Void) {
    background.enter()
    Self.queue.async {
      job()
      self.background.leave()
    }
  }

  /// Blocks until no background commit of this object is in flight.
  func waitForBackground() { background.wait() }

  /// Flushes the object's shard directory and its parents, once per handle, before a commit lists chunks.
  func syncNameOnce(_ store: ShardedStore, _ id: ObjectID) throws {
    if nameSynced.load(ordering: .acquiring) { return }
    try store.syncShardChain(for: id)
    nameSynced.store(true, ordering: .releasing)
  }
}
