import Foundation
import Synchronization
import SystemPackage

@testable import MediaCache

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Simulates losing power, in the spirit of SQLite's crash tests: it records what the library changed on disk
/// since the last `fsync`, stops the world at a chosen call, then undoes or garbles what was not yet durable.
///
/// The model (also in `docs/RELIABILITY.md`), deliberately pessimistic and simple:
/// - **File data.** Each `pwrite` and `ftruncate` of a file (tracked by inode, through a duplicate descriptor,
///   whatever its name) is recorded with the bytes it replaced. A successful `fsync`/`fdatasync` of the file
///   makes durable the changes whose call had returned before the sync started (a write racing with a sync stays
///   volatile). At power loss every volatile change is, per trial policy, kept, dropped (old bytes back) or
///   garbled (random bytes over exactly its range); and, half the time when something was dropped, the file's
///   size goes back to its size when its oldest volatile change was made. Sector-level tearing of bytes outside
///   a write's range is not modelled (powersafe overwrite, as SQLite assumes by default).
/// - **Failed fsync** (injected, `failDataSync`): like Linux after a writeback error, the changes it should
///   have flushed are *poisoned*: a later successful fsync does not make them durable, and at power loss they
///   are always dropped or garbled, never kept.
/// - **Names.** `open(O_CREAT)` that created a file, `rename`, `link`, `unlink`, `mkdir` and `rmdir` are
///   volatile until their directory (the destination's, for rename and link; the parent, for mkdir and rmdir)
///   is fsynced. `fsync` of a file never makes its name durable. At power loss each volatile name change is undone
///   independently, newest first, with the trial's probability (0, ½ or 1): a file created comes off its name,
///   a rename moves back and the replaced file (kept alive by a hard link in `stash`) comes back, an unlinked
///   name comes back, a created directory is moved away whole (its contents are lost), a removed directory is
///   made again. An undo whose precondition no longer holds (the name now names something else) is skipped.
///   Undoing independently allows orders a journaling file system would not produce; that only makes the test
///   stricter.
/// - **Crash point.** The nth call under `root` (or the nth sync) fails with EIO, and so does every later call:
///   the process is dead as far as the disk is concerned. What it still holds in memory is then thrown away by
///   the test, which opens the tree afresh.
/// - Only paths under `root` are watched (the `FORMAT` marker and `objects/`, `tmp/` exist before recording
///   starts and count as durable).
final class PowerLossSimulator: IOFaultHandler {
  enum CrashPoint: Sendable, CustomStringConvertible {
    case never
    /// The nth call of any kind.
    case call(Int)
    /// The nth fsync, fdatasync or directory fsync.
    case sync(Int)
    /// The first directory fsync right after a rename (the commit's last step).
    case directorySyncAfterRename

    var description: String {
      switch self {
      case .never: "never"
      case .call(let n): "call \(n)"
      case .sync(let n): "sync \(n)"
      case .directorySyncAfterRename: "directory sync after rename"
      }
    }
  }

  enum DataPolicy: CaseIterable, Sendable { case keep, drop, garble, mixed }

  let root: String
  let stash: String

  private enum Change {
    case write(offset: Int64, prior: [UInt8], length: Int, sizeBefore: Int64)
    case truncate(priorSize: Int64, priorTail: [UInt8], newLength: Int64)
  }

  private struct Volatile {
    var sequence: Int
    var change: Change
    var poisoned = false
    /// For a poisoned write: the parts not yet written again by a later write that a sync made durable.
    var notRewritten: [Range<Int64>] = []
  }

  private final class FileRecord {
    let descriptor: Int32
    var changes: [Volatile] = []
    /// The size last made durable (by a sync, or when recording began with nothing volatile).
    var durableSize: Int64
    init(descriptor: Int32, durableSize: Int64) {
      self.descriptor = descriptor
      self.durableSize = durableSize
    }
  }

  private enum NameChange {
    case create(path: String, key: FileKey)
    case link(destination: String, key: FileKey)
    case rename(source: String, destination: String, key: FileKey, replaced: String?)
    case unlink(path: String, kept: String)
    case makeDirectory(path: String)
    case removeDirectory(path: String)

    /// The directory whose fsync makes this change durable.
    var directory: String {
      switch self {
      case .create(let path, _), .unlink(let path, _), .makeDirectory(let path), .removeDirectory(let path):
        parentDirectory(of: path)
      case .link(let destination, _), .rename(_, let destination, _, _): parentDirectory(of: destination)
      }
    }

    /// The name it adds or removes.
    var name: String {
      switch self {
      case .create(let path, _), .unlink(let path, _), .makeDirectory(let path), .removeDirectory(let path):
        path
      case .link(let destination, _), .rename(_, let destination, _, _): destination
      }
    }

    /// Hard links in the stash this change holds.
    var stashed: String? {
      switch self {
      case .rename(_, _, _, let replaced): replaced
      case .unlink(_, let kept): kept
      default: nil
      }
    }
  }

  private struct State {
    var crashPoint: CrashPoint
    var failDataSync: Int?
    var calls = 0
    var syncs = 0
    var dataSyncs = 0
    var crashed = false
    var crashedAt: String?
    var lastOperation: IOOperation?
    var sequence = 0
    var files: [FileKey: FileRecord] = [:]
    var names: [(sequence: Int, change: NameChange)] = []
    var stashCount = 0
    var writesRecorded = 0
    var syncFailuresInjected = 0
  }

  private let state: Mutex<State>

  init(root: String, stash: String, crashPoint: CrashPoint, failDataSync: Int? = nil) {
    self.root = root
    self.stash = stash
    state = Mutex(State(crashPoint: crashPoint, failDataSync: failDataSync))
  }

  deinit {
    state.withLock { state in
      for record in state.files.values { _ = close(record.descriptor) }
      state.files = [:]
    }
  }

  /// Whether the crash point was reached, and at which call.
  var crashed: (Bool, String?) { state.withLock { ($0.crashed, $0.crashedAt) } }
  /// Calls seen under `root` (to pick crash points).
  var callsSeen: (calls: Int, syncs: Int) { state.withLock { ($0.calls, $0.syncs) } }
  /// Writes recorded and fsync failures injected.
  var statistics: (writes: Int, syncFailures: Int) {
    state.withLock { ($0.writesRecorded, $0.syncFailuresInjected) }
  }

  /// Stops the world now (every later call fails), as if the crash point had been reached.
  func crashNow() { state.withLock { $0.crashed = true } }

  // MARK: Recording

  private struct WriteContext: Sendable {
    var key: FileKey
    var prior: [UInt8]
    var sizeBefore: Int64
  }
  private struct SyncContext: Sendable {
    var key: FileKey?
    var size: Int64? = nil
    var sequence: Int
  }
  private struct ExistedContext: Sendable { var existed: Bool }
  private struct StashContext: Sendable { var stashed: String? }

  func before(_ event: IOEvent) throws(Errno) -> (any Sendable)? {
    guard event.path.hasPrefix(root) else { return nil }
    let outcome: Result<(any Sendable)?, Errno> = state.withLock { state in
      if state.crashed { return .failure(.ioError) }
      // A file's times are not what a power loss is simulated for (recency is a hint): not counted as a call,
      // so that crash points and recorded replays number the same calls as before they passed through here,
      // and not an operation between a rename and its directory's sync.
      if event.operation == .touch { return .success(nil) }
      state.calls += 1
      let isSync = [.sync, .syncData, .syncDirectory].contains(event.operation)
      if isSync { state.syncs += 1 }
      defer { state.lastOperation = event.operation }
      let afterRename = event.operation == .syncDirectory && state.lastOperation == .rename
      let reached: Bool
      switch state.crashPoint {
      case .never: reached = false
      case .call(let n): reached = state.calls >= n
      case .sync(let n): reached = isSync && state.syncs >= n
      case .directorySyncAfterRename: reached = afterRename
      }
      if reached {
        state.crashed = true
        state.crashedAt = "\(event.operation) \(event.path.dropFirst(root.count))"
        return .failure(.ioError)
      }
      if event.operation == .syncData || (event.operation == .sync && event.path.hasSuffix(".data")) {
        state.dataSyncs += 1
        if state.dataSyncs == state.failDataSync, case let (key, _)? = inodeOf(descriptor: event.descriptor) {
          // Like Linux after a writeback error: what this sync should have flushed is lost for good.
          state.syncFailuresInjected += 1
          if let record = state.files[key] {
            // Data pages only: the size (inode metadata) goes with the next successful sync.
            for index in record.changes.indices {
              if case .write(let offset, _, let length, _) = record.changes[index].change {
                record.changes[index].poisoned = true
                record.changes[index].notRewritten = [offset..<(offset + Int64(length))]
              }
            }
          }
          return .failure(.ioError)
        }
      }
      return .success(prepare(event, &state))
    }
    return try outcome.get()
  }

  private func prepare(_ event: IOEvent, _ state: inout State) -> (any Sendable)? {
    switch event.operation {
    case .write, .deallocate:
      guard case let (key, size)? = inodeOf(descriptor: event.descriptor) else { return nil }
      let prior = readBytes(descriptor: event.descriptor, offset: event.offset, count: Int(event.length))
      return WriteContext(key: key, prior: prior, sizeBefore: size)
    case .truncate:
      guard case let (key, size)? = inodeOf(descriptor: event.descriptor) else { return nil }
      let tail =
        event.length < size
        ? readBytes(descriptor: event.descriptor, offset: event.length, count: Int(size - event.length)) : []
      return WriteContext(key: key, prior: tail, sizeBefore: size)
    case .sync, .syncData:
      let file = inodeOf(descriptor: event.descriptor)
      return SyncContext(key: file?.key, size: file?.size, sequence: state.sequence)
    case .syncDirectory:
      return SyncContext(key: nil, sequence: state.sequence)
    case .open:
      return ExistedContext(existed: !event.creates || inodeOf(path: event.path) != nil)
    case .makeDirectory:
      return ExistedContext(existed: inodeOf(path: event.path) != nil)
    case .rename:
      guard let destination = event.destination, inodeOf(path: destination) != nil else {
        return StashContext(stashed: nil)
      }
      return StashContext(stashed: stashLink(destination, &state))
    case .unlink:
      guard inodeOf(path: event.path) != nil else { return StashContext(stashed: nil) }
      return StashContext(stashed: stashLink(event.path, &state))
    case .read, .link, .removeDirectory, .touch:
      return nil
    }
  }

  /// A hard link in the stash keeping `path`'s inode alive, so a change that drops it can be undone.
  private func stashLink(_ path: String, _ state: inout State) -> String? {
    state.stashCount += 1
    let kept = "\(stash)/\(state.stashCount)"
    return link(path, kept) == 0 ? kept : nil
  }

  func after(_ event: IOEvent, context: (any Sendable)?, error: Errno?) {
    guard event.path.hasPrefix(root), event.operation != .touch else { return }
    state.withLock { state in
      if error != nil {
        if let stashed = (context as? StashContext)?.stashed { unlink(stashed) }
        return
      }
      state.sequence += 1
      let sequence = state.sequence
      switch event.operation {
      case .write, .deallocate, .truncate:
        guard let context = context as? WriteContext else { return }
        let record: FileRecord
        if let existing = state.files[context.key] {
          record = existing
        } else {
          // Close-on-exec, as every descriptor the library opens, so that no child another suite spawns
          // (swift-testing's exit tests, Foundation's Process) keeps the data file's in-use flock past its
          // exec. Until its exec a child has a copy of every descriptor, close-on-exec or not: the harness
          // waits for that before its checks (`PowerLossHarness.waitForChildrenToLetGo`).
          record = FileRecord(
            descriptor: fcntl(event.descriptor, F_DUPFD_CLOEXEC, 0), durableSize: context.sizeBefore)
          state.files[context.key] = record
        }
        let change: Change =
          event.operation != .truncate
          ? .write(
            offset: event.offset, prior: context.prior, length: Int(event.length),
            sizeBefore: context.sizeBefore)
          : .truncate(priorSize: context.sizeBefore, priorTail: context.prior, newLength: event.length)
        record.changes.append(Volatile(sequence: sequence, change: change))
        state.writesRecorded += 1
      case .sync, .syncData:
        guard let context = context as? SyncContext, let key = context.key, let record = state.files[key]
        else {
          return
        }
        if let size = context.size { record.durableSize = size }
        let synced = record.changes.filter { !$0.poisoned && $0.sequence <= context.sequence }
        record.changes.removeAll { !$0.poisoned && $0.sequence <= context.sequence }
        // A poisoned write wholly written again by later writes, each made durable by some sync, is superseded
        // (the rewrite dirtied the pages again).
        for index in record.changes.indices where record.changes[index].poisoned {
          for new in synced where new.sequence > record.changes[index].sequence {
            guard case .write(let at, _, let count, _) = new.change else { continue }
            record.changes[index].notRewritten = subtract(
              at..<(at + Int64(count)), from: record.changes[index].notRewritten)
          }
        }
        record.changes.removeAll { $0.poisoned && $0.notRewritten.isEmpty }
        if record.changes.isEmpty {
          _ = close(record.descriptor)
          state.files[key] = nil
        }
      case .syncDirectory:
        guard let context = context as? SyncContext else { return }
        let directory = event.path
        state.names.removeAll { entry in
          guard entry.sequence <= context.sequence, entry.change.directory == directory else { return false }
          if let stashed = entry.change.stashed { unlink(stashed) }
          return true
        }
      case .open:
        guard let context = context as? ExistedContext, !context.existed,
          case let (key, _)? = inodeOf(descriptor: event.descriptor)
        else { return }
        state.names.append((sequence: sequence, change: .create(path: event.path, key: key)))
      case .makeDirectory:
        guard let context = context as? ExistedContext, !context.existed else { return }
        state.names.append((sequence: sequence, change: .makeDirectory(path: event.path)))
      case .removeDirectory:
        state.names.append((sequence: sequence, change: .removeDirectory(path: event.path)))
      case .rename:
        guard let destination = event.destination, let key = inodeOf(path: destination) else { return }
        let replaced = (context as? StashContext)?.stashed
        state.names.append(
          (
            sequence: sequence,
            change: .rename(source: event.path, destination: destination, key: key, replaced: replaced)
          ))
      case .link:
        guard let destination = event.destination, let key = inodeOf(path: destination) else { return }
        state.names.append((sequence: sequence, change: .link(destination: destination, key: key)))
      case .unlink:
        guard let kept = (context as? StashContext)?.stashed else { return }
        state.names.append((sequence: sequence, change: .unlink(path: event.path, kept: kept)))
      case .read, .touch:  // (`.touch` never reaches here: returned from above.)
        return
      }
    }
  }

  /// `ranges` without the bytes of `cut`.
  private func subtract(_ cut: Range<Int64>, from ranges: [Range<Int64>]) -> [Range<Int64>] {
    ranges.flatMap { range -> [Range<Int64>] in
      guard cut.overlaps(range) else { return [range] }
      return [
        range.lowerBound..<max(range.lowerBound, cut.lowerBound),
        min(range.upperBound, cut.upperBound)..<range.upperBound,
      ]
      .filter { !$0.isEmpty }
    }
  }

  // MARK: Losing power

  /// What `losePower` did.
  struct Damage: Sendable {
    var changesKept = 0
    var changesDropped = 0
    var changesGarbled = 0
    var namesUndone = 0
    var namesKept = 0
  }

  /// Applies the model to the tree: call once the world has stopped (every manager closed, the background
  /// commit queue idle) and after removing this handler.
  func losePower(
    data policy: DataPolicy, undoNames probability: Double,
    onlyNamesMatching filter: ((String) -> Bool)? = nil,
    using rng: inout some RandomNumberGenerator
  ) -> Damage {
    var damage = Damage()
    state.withLock { state in
      state.crashed = true
      for (_, change) in state.names.reversed() {
        if Double.random(in: 0..<1, using: &rng) < probability, filter.map({ $0(change.name) }) ?? true,
          undo(change)
        {
          damage.namesUndone += 1
        } else {
          damage.namesKept += 1
        }
      }
      for (_, record) in state.files {
        var dropped = false
        var smallestSize: Int64?
        for volatile in record.changes.reversed() {
          var choice: DataPolicy =
            policy == .mixed ? [.keep, .drop, .garble].randomElement(using: &rng)! : policy
          if volatile.poisoned && choice == .keep { choice = .drop }
          switch (choice, volatile.change) {
          case (.keep, _), (.mixed, _):
            damage.changesKept += 1
          case (.drop, .write(let offset, let prior, let length, let sizeBefore)):
            var restored = prior
            if restored.count < length { restored += [UInt8](repeating: 0, count: length - restored.count) }
            // A poisoned write's parts written again and made durable since stay as they are.
            for part in volatile.poisoned ? volatile.notRewritten : [offset..<(offset + Int64(length))] {
              writeBytes(
                descriptor: record.descriptor, offset: part.lowerBound,
                Array(restored[Int(part.lowerBound - offset)..<Int(part.upperBound - offset)]))
            }
            smallestSize = min(smallestSize ?? sizeBefore, sizeBefore)
            dropped = true
            damage.changesDropped += 1
          case (.drop, .truncate(let priorSize, let priorTail, let newLength)):
            _ = ftruncate(record.descriptor, off_t(max(priorSize, newLength)))
            if !priorTail.isEmpty { writeBytes(descriptor: record.descriptor, offset: newLength, priorTail) }
            smallestSize = min(smallestSize ?? priorSize, priorSize)
            dropped = true
            damage.changesDropped += 1
          case (.garble, .write(let offset, _, let length, _)):
            for part in volatile.poisoned ? volatile.notRewritten : [offset..<(offset + Int64(length))] {
              writeBytes(
                descriptor: record.descriptor, offset: part.lowerBound,
                (0..<part.count).map { _ in UInt8.random(in: 0...255, using: &rng) })
            }
            damage.changesGarbled += 1
          case (.garble, .truncate):
            damage.changesKept += 1
          }
        }
        if dropped, let smallestSize, Bool.random(using: &rng) {
          _ = ftruncate(record.descriptor, off_t(max(smallestSize, record.durableSize)))
        }
      }
      for record in state.files.values { _ = close(record.descriptor) }
      state.files = [:]
      state.names = []
    }
    return damage
  }

  /// Undoes one name change if the tree still shows it; returns whether it did.
  private func undo(_ change: NameChange) -> Bool {
    switch change {
    case .create(let path, let key), .link(let path, let key):
      guard inodeOf(path: path) == key else { return false }
      return unlink(path) == 0
    case .rename(let source, let destination, let key, let replaced):
      guard inodeOf(path: destination) == key, inodeOf(path: source) == nil,
        inodeOf(path: parentDirectory(of: source)) != nil
      else { return false }
      guard rename(destination, source) == 0 else { return false }
      if let replaced { _ = rename(replaced, destination) }
      return true
    case .unlink(let path, let kept):
      guard inodeOf(path: path) == nil, inodeOf(path: parentDirectory(of: path)) != nil else { return false }
      return rename(kept, path) == 0
    case .makeDirectory(let path):
      guard inodeOf(path: path) != nil else { return false }
      let away = "\(stash)/lost-directory-\(UInt64.random(in: 0...UInt64.max))"
      return rename(path, away) == 0
    case .removeDirectory(let path):
      guard inodeOf(path: path) == nil else { return false }
      return mkdir(path, 0o700) == 0
    }
  }
}
