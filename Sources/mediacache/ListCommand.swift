import ArgumentParser
import MediaCache

struct ListCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "ls", abstract: "List every cached object (walks the whole tree).",
    discussion: """
      One line per object: id, state, bytes cached, pinned. Keys are not stored, so objects are listed by id \
      (inspect KEY-OR-URL shows the id of a key). For totals, see stats.

      Example: mediacache ls --json
      """)

  @OptionGroup var cache: CacheOptions
  @Flag(help: "Print a JSON array.") var json = false

  func run() async throws {
    try await reportingErrors {
      guard let mediaCache = try cache.openExisting() else {
        if json { try printJSON([ListEntry]()) }
        return
      }
      var entries: [ListEntry] = []
      for id in try mediaCache.store.allObjectIDs() {
        do {
          guard let manifest = try mediaCache.store.readManifest(id) else {
            entries.append(ListEntry(objectID: id, state: "none", error: "no manifest"))
            if !json { printOut("\(id.hex)  none  (data file without manifest)") }
            continue
          }
          let status = MediaCache.status(of: manifest)
          entries.append(
            ListEntry(
              objectID: id, state: status.stateName, cachedBytes: status.cachedBytes,
              length: manifest.contentLength, pinned: manifest.isPinned,
              diskBytes: try mediaCache.store.diskUsage(id)))
          if !json {
            printOut("\(id.hex)  \(status.humanLine)\(manifest.isPinned ? "  pinned" : "")")
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
