import Foundation
import MediaCacheTestSupport
import SystemPackage
import Testing

@testable import MediaCache

extension FaultTests {
  /// A full disk during a compactor pass. Found by tools/soak: `cache-compactor --interval` ended with "pass 31
  /// failed: pwrite failed on …/tmp/compactor.cursor…: No space left on device", so on the full disk it was
  /// there to relieve, the compactor stopped for good.
  @Suite struct CompactorNoSpace {
    /// The pass evicts and scrubs as usual, reports the scrub position it could not save as an error of the
    /// pass (not a failed pass), and leaves no staging file in `tmp/`.
    @Test func aPassOnAFullDiskEvictsAndReportsTheUnsavedScrubCursor() async throws {
      try await withTemporaryDirectory { directory in
        let root = "\(directory)/cache"
        let cache = try MediaCache(
          configuration: .init(
            directory: FilePath(root), chunkSize: 4096, memoryCostLimit: 0, durability: .relaxed,
            maxSize: nil, maxAge: nil))
        for index in 0..<3 {
          try await cache.store(
            randomBytes(count: 3 * 4096, seed: UInt64(index)), for: "object-\(index)", policy: .diskOnly)
        }
        let compactor = try Compactor(
          directory: FilePath(root),
          policy: CompactionPolicy(maxSize: 4 * 4096, maxAge: nil, scrubBudget: 1 << 20))
        let full = FaultInjector(
          root: root,
          rules: [
            FaultRule(operation: .write, pathContains: "compactor.cursor", errno: .noSpace, persistent: true)
          ])
        let report = try await withIOFaultHandler(full) { try compactor.runPass() }
        #expect(full.fired == [1])
        #expect(report.evictedCount >= 2)
        #expect(report.chunksScrubbed > 0)
        #expect(report.errors.contains { $0.contains("scrub position not saved") && $0.contains("No space") })
        let staging = try FileManager.default.contentsOfDirectory(atPath: "\(root)/tmp")
        #expect(staging.isEmpty, "left in tmp/: \(staging)")
        // The next pass, on a disk with room again, saves it.
        _ = try compactor.runPass()
        #expect(compactor.readCursor() != nil)
      }
    }
  }
}
