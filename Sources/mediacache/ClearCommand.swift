import ArgumentParser
import MediaCache

struct ClearCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "clear",
    abstract: "Remove every object no process has open; print the bytes freed.",
    discussion: """
      Pinned objects are removed too. Objects in use are kept and listed; the exit status is then 3. To evict \
      down to a size instead, see purge.

      Example: mediacache clear --cache /var/cache/mediacache
      """)

  @OptionGroup var cache: CacheOptions

  func run() async throws {
    try await reportingErrors(onIOExecutor: true) {
      guard let mediaCache = try cache.openExisting() else {
        printOut("freed 0 bytes (0 objects)")
        return
      }
      let report = try await mediaCache.removeAll()
      printOut("freed \(report.bytesFreed) bytes (\(report.objectsRemoved) objects)")
      if !report.busy.isEmpty {
        for id in report.busy { printOut("busy: \(id.hex) kept (in use)") }
        throw fail("\(report.busy.count) object(s) in use were kept", .busy)
      }
    }
  }
}
