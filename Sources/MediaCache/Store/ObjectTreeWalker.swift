import Foundation
import Synchronization

/// What the walk of `objects/` found: an object's file, or an entry the layout does not put where it is.
enum ObjectTreeEntry: Sendable {
  /// An entry named like an object's data file or manifest: 64 lowercase hex digits and `.data` or
  /// `.manifest`. It may not be a regular file (see `ObjectTreeFile.status`): nothing is ever opened through
  /// such an entry.
  case objectFile(ObjectTreeFile)
  /// Something named like a shard directory (`objects/ab`, `objects/ab/cd`) that is not a directory.
  case wrongType(relative: String)
  /// A directory under `objects/` whose name is not two lowercase hex digits (where the layout has shards).
  case badShardName(relative: String, name: String)
  /// A name that is not part of the layout; `topLevel`: directly in `objects/`.
  case unknown(relative: String, topLevel: Bool)
}

/// A file named like an object's file, as the walk found it.
struct ObjectTreeFile: Sendable {
  var id: ObjectID
  /// The data file (else the manifest).
  var isData: Bool
  /// Path relative to the cache root (`objects/ab/cd/<hex>.data`).
  var relative: String
  /// From `fstatat`, or only the type (`d_type`) for names the walk was not asked to stat. Not necessarily a
  /// regular file.
  var status: FileStatus
  /// It sits where its id puts it: in `objects/ab/cd/` with `ab` and `cd` the first two bytes of its id.
  var placed: Bool
}

/// An innermost shard directory, still open, after its entries were handed over (see `ObjectTreeWalker.walk`).
struct ObjectTreeShard {
  /// Its descriptor, valid only during the call.
  var descriptor: Int32
  /// Path relative to the cache root (`objects/ab/cd`).
  var relative: String
  /// Both its name and its parent's are shard names.
  var isValid: Bool
}

/// The one walk of the shard tree `objects/ab/cd/`, shared by `ShardedStore.allObjectIDs`, `scanObjects` (the
/// compactor) and `CacheChecker` (`cache-fsck`), so the rules of what counts as an object are written once
/// (docs/FORMAT.md, section 1.2): both shard names are two lowercase hex digits, the file name is 64 lowercase
/// hex digits plus `.data` or `.manifest`, and the hex starts with the two shard names.
///
/// Entries of `objects/` and of the outer shards are typed from `d_type` alone; entries of the innermost
/// directories are `fstatat`ed when `statWhen` accepts their name (all when it is nil). Nothing is followed: a
/// symlink where a directory belongs is reported, never listed.
struct ObjectTreeWalker: Sendable {
  /// The cache root.
  var root: String
  /// Also list directories whose names are not shard names, and files directly in an outer shard (the
  /// checker's view: objects stored there are found and reported as misplaced). The store's own walks skip
  /// them.
  var includeStrays = false
  /// Entries of innermost directories to `fstatat`; nil: all of them.
  var statWhen: (@Sendable (UnsafePointer<CChar>) -> Bool)?
  /// Outer shard directories walked at once, each by one thread; results keep the listing order.
  var threads = 1
  /// Ignore directories that cannot be listed (the checker reports on trees whatever state they are in) instead
  /// of throwing the first such error.
  var tolerant = false

  /// Walks `objects/`. For each entry of `objects/` (in listing order) a `Part` is made by `makePart` and fed
  /// every entry found under it (`visit`), and `shardListed` once per innermost directory after its entries,
  /// while the directory is open. Returns the parts in the order of `objects/`'s listing, whatever the number
  /// of threads; an empty array when `objects/` is missing.
  func walk<Part: Sendable>(
    _ makePart: @Sendable () -> Part,
    visit: @Sendable (inout Part, ObjectTreeEntry) -> Void,
    shardListed: (@Sendable (inout Part, ObjectTreeShard) -> Void)? = nil
  ) throws -> [Part] {
    let outers: [(name: String, status: FileStatus)]
    do {
      outers = try FileSystemCalls.scanDirectory("\(root)/objects", statWhen: { _ in false }) ?? []
    } catch  where tolerant {
      return []
    }
    @Sendable func work(_ index: Int) throws -> Part {
      var part = makePart()
      try walkOuter(outers[index].name, outers[index].status, &part, visit, shardListed)
      return part
    }
    let workers = min(threads, ProcessInfo.processInfo.activeProcessorCount, outers.count)
    if workers <= 1 { return try outers.indices.map(work) }
    let next = Atomic<Int>(0)
    let results = Mutex<(parts: [Int: Part], error: (any Error)?)>(([:], nil))
    DispatchQueue.concurrentPerform(iterations: workers) { _ in
      while true {
        let index = next.add(1, ordering: .relaxed).oldValue
        guard index < outers.count, results.withLock({ $0.error == nil }) else { break }
        do {
          let part = try work(index)
          results.withLock { $0.parts[index] = part }
        } catch {
          results.withLock { $0.error = $0.error ?? error }
        }
      }
    }
    return try results.withLock { results in
      if let error = results.error { throw error }
      return outers.indices.map { results.parts[$0]! }
    }
  }

  /// Whether `name` is a shard directory's name: two lowercase hex digits.
  static func isShardName(_ name: String) -> Bool {
    name.utf8.count == 2 && name.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
  }

  /// The object a file name names, and whether it is its data file: 64 lowercase hex digits and `.data` or
  /// `.manifest`, nothing else.
  static func objectFileName(_ name: String) -> (id: ObjectID, isData: Bool)? {
    let isData = name.hasSuffix(".data")
    guard isData || name.hasSuffix(".manifest"), name.utf8.count == 64 + (isData ? 5 : 9),
      let id = ObjectID(hex: name.prefix(64))
    else { return nil }
    return (id, isData)
  }

  private func walkOuter<Part>(
    _ name: String, _ status: FileStatus, _ part: inout Part,
    _ visit: (inout Part, ObjectTreeEntry) -> Void, _ shardListed: ((inout Part, ObjectTreeShard) -> Void)?
  ) throws {
    let relative = "objects/\(name)"
    let valid = Self.isShardName(name)
    guard status.isDirectory else {
      visit(&part, valid ? .wrongType(relative: relative) : .unknown(relative: relative, topLevel: true))
      return
    }
    if !valid {
      guard includeStrays else { return }
      visit(&part, .badShardName(relative: relative, name: name))
    }
    _ = try scan("\(root)/\(relative)", parent: nil, statWhen: { _ in false }) { descriptor, inners in
      for inner in inners {
        let innerRelative = "\(relative)/\(inner.name)"
        let innerValid = Self.isShardName(inner.name)
        guard inner.status.isDirectory else {
          if valid && innerValid {
            visit(&part, .wrongType(relative: innerRelative))
          } else if includeStrays {
            visitFile(inner.name, in: relative, status: inner.status, placed: false, &part, visit)
          }
          continue
        }
        if !innerValid {
          guard includeStrays else { continue }
          if valid { visit(&part, .badShardName(relative: innerRelative, name: inner.name)) }
        }
        let prefix = name + inner.name
        _ = try scan(
          "\(root)/\(innerRelative)", parent: (descriptor, inner.name), statWhen: statWhen
        ) { fd, entries in
          for entry in entries {
            let placed = valid && innerValid && entry.name.hasPrefix(prefix)
            visitFile(entry.name, in: innerRelative, status: entry.status, placed: placed, &part, visit)
          }
          shardListed?(
            &part, ObjectTreeShard(descriptor: fd, relative: innerRelative, isValid: valid && innerValid))
        }
      }
    }
  }

  private func visitFile<Part>(
    _ name: String, in directory: String, status: FileStatus, placed: Bool, _ part: inout Part,
    _ visit: (inout Part, ObjectTreeEntry) -> Void
  ) {
    let relative = "\(directory)/\(name)"
    guard let (id, isData) = Self.objectFileName(name) else {
      visit(&part, .unknown(relative: relative, topLevel: false))
      return
    }
    visit(
      &part,
      .objectFile(ObjectTreeFile(id: id, isData: isData, relative: relative, status: status, placed: placed)))
  }

  /// `FileSystemCalls.scanDirectory`, with a failure ignored when `tolerant`.
  private func scan(
    _ path: String, parent: (descriptor: Int32, name: String)?,
    statWhen: ((UnsafePointer<CChar>) -> Bool)?,
    _ body: (Int32, [(name: String, status: FileStatus)]) throws -> Void
  ) throws -> Void? {
    do {
      return try FileSystemCalls.scanDirectory(path, parent: parent, statWhen: statWhen, body)
    } catch let error as SystemCallError where tolerant {
      _ = error
      return nil
    }
  }
}
