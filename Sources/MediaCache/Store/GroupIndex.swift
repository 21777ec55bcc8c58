import Crypto
import Foundation

/// The group index: `groups/<gg>/<64 hex>/<object hex>`, one empty file per member of a group, in a directory
/// named by the SHA-256 of the group's name (`gg` its first byte). It lets `MediaCache.remove(group:)` find a
/// group's objects without walking `objects/`.
///
/// The manifest's `group` is the truth; the index only points at candidates. An entry is made (and, in the
/// durable mode, flushed) before the manifest that names the group is committed, so a crash leaves at worst an
/// entry whose object is not in the group. Removing an object removes its entry; an entry left by a crash or a
/// change of group is dropped by the next `remove(group:)` of that group, and `cache-fsck --repair` makes the
/// index agree with the manifests (docs/FORMAT.md section 1.5).
extension ShardedStore {
  /// `<root>/groups`.
  package var groupsDirectory: String { "\(root)/groups" }

  /// The directory of `group`'s entries and its shard: `(groups/gg, groups/gg/<64 hex>)`.
  package func groupDirectories(_ group: String) -> (shard: String, directory: String) {
    let hex = ObjectID(bytes: Array(SHA256.hash(data: Data(group.utf8))))!.hex
    let shard = "\(groupsDirectory)/\(hex.prefix(2))"
    return (shard, "\(shard)/\(hex)")
  }

  /// Records `id` as a member of `group` (an existing entry is fine). In the durable mode the entry's name is
  /// flushed, and so are the directories it created.
  package func addGroupEntry(_ id: ObjectID, group: String) throws {
    let (shard, directory) = groupDirectories(group)
    let entry = "\(directory)/\(id.hex)"
    try mapIO {
      if try FileSystemCalls.status(entry) != nil { return }
      let madeGroups = try FileSystemCalls.makeDirectory(groupsDirectory)
      let madeShard = try FileSystemCalls.makeDirectory(shard)
      let madeDirectory = try FileSystemCalls.makeDirectory(directory)
      let file = try SystemFile(path: entry, writable: true, create: true)
      file.close()
      guard durability == .durable else { return }
      try FileSystemCalls.syncDirectory(directory)
      if madeDirectory { try FileSystemCalls.syncDirectory(shard) }
      if madeShard { try FileSystemCalls.syncDirectory(groupsDirectory) }
      if madeGroups { try FileSystemCalls.syncDirectory(root) }
    }
  }

  /// Whether `path` is a directory itself (`lstat`): a symlink or file where the index keeps a directory is
  /// never followed (FORMAT.md section 1.4), and reads as an empty group.
  private func isRealDirectory(_ path: String) throws -> Bool {
    try mapIO { try FileSystemCalls.status(path)?.isDirectory ?? false }
  }

  /// Removes `id`'s entry in `group`, and the group's directories when they are left empty. Returns whether
  /// there was an entry.
  @discardableResult
  package func removeGroupEntry(_ id: ObjectID, group: String) throws -> Bool {
    let (shard, directory) = groupDirectories(group)
    guard try isRealDirectory(shard), try isRealDirectory(directory) else { return false }
    return try mapIO {
      let removed = try FileSystemCalls.unlinkFile("\(directory)/\(id.hex)")
      if FileSystemCalls.removeEmptyDirectory(directory) { FileSystemCalls.removeEmptyDirectory(shard) }
      return removed
    }
  }

  /// The objects the index lists for `group`, in id order; names that are not object ids are skipped. Reads
  /// one directory: the cost depends on the group's size, not the cache's. Entries are candidates (see the
  /// type's note): check the manifest's `group`.
  package func groupEntries(_ group: String) throws -> [ObjectID] {
    let (shard, directory) = groupDirectories(group)
    guard try isRealDirectory(groupsDirectory), try isRealDirectory(shard), try isRealDirectory(directory)
    else { return [] }
    let names = try mapIO { try FileSystemCalls.directoryEntries(directory) } ?? []
    return names.compactMap { ObjectID(hex: $0) }.sorted()
  }

  /// Every group directory of the index with its entries' names, for the checker: `(relative path, names in
  /// it)`, names nil for an entry that is not a directory (never followed). Shard and group names that are not
  /// hex are returned too, so they can be reported.
  package func allGroupDirectories() throws -> [(relative: String, names: [String]?)] {
    var result: [(String, [String]?)] = []
    for shard in try mapIO({ try FileSystemCalls.directoryEntries(groupsDirectory) }) ?? [] {
      guard try isRealDirectory("\(groupsDirectory)/\(shard)") else {
        result.append(("groups/\(shard)", nil))
        continue
      }
      for group in try mapIO({ try FileSystemCalls.directoryEntries("\(groupsDirectory)/\(shard)") }) ?? [] {
        let relative = "groups/\(shard)/\(group)"
        guard try isRealDirectory("\(root)/\(relative)") else {
          result.append((relative, nil))
          continue
        }
        result.append(
          (relative, try mapIO { try FileSystemCalls.directoryEntries("\(root)/\(relative)") } ?? []))
      }
    }
    return result.sorted { $0.0 < $1.0 }
  }
}
