import ArgumentParser
import MediaCache

struct ListCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "ls", abstract: "List every cached object (walks the whole tree).",
    discussion: """
      One line per object: id, state, bytes cached, pinned, group. Keys are not stored, so objects are listed \
      by id (inspect KEY-OR-URL shows the id of a key). For totals, see stats. With --group, only that group's \
      objects, found through the group index (no walk).

      Example: mediacache ls --json
      """)

  @OptionGroup var cache: CacheOptions
  @Flag(help: "Print a JSON array.") var json = false
  @Option(help: "List only the objects of group G.") var group: String?

  func validate() throws { try validateGroupOption(group) }

  func run() async throws {
    try await reportingErrors(onIOExecutor: true) {
      guard let mediaCache = try cache.openExisting() else {
        if json { try printJSON([ListEntry]()) }
        return
      }
      var entries: [ListEntry] = []
      let ids = try group.map { try mediaCache.store.groupEntries($0) } ?? mediaCache.store.allObjectIDs()
      for id in ids {
        do {
          guard let manifest = try mediaCache.store.readManifest(id) else {
            if group != nil { continue }  // a stale index entry
            entries.append(ListEntry(objectID: id, state: "none", error: "no manifest"))
            if !json { printOut("\(id.hex)  none  (data file without manifest)") }
            continue
          }
          if let group, manifest.group != group { continue }  // a stale index entry
          let status = MediaCache.status(of: manifest)
          entries.append(
            ListEntry(
              objectID: id, state: status.stateName, cachedBytes: status.cachedBytes,
              length: manifest.contentLength, pinned: manifest.isPinned,
              diskBytes: try mediaCache.store.diskUsage(id), group: manifest.group))
          if !json {
            printOut(
              "\(id.hex)  \(status.humanLine)\(manifest.isPinned ? "  pinned" : "")"
                + (manifest.group.map { "  group=\($0)" } ?? ""))
          }
        } catch let error as StoreError {
          entries.append(ListEntry(objectID: id, state: "unreadable", error: error.description))
          if !json { printOut("\(id.hex)  unreadable: \(error)") }
        }
      }
      if json { try printJSON(entries) }
    }
  }
}
