import Foundation
import MediaCache
import MediaCacheTestSupport
import Testing

@testable import cache_compactor

/// Namespaces through the binaries: `mediacache --namespace`, and one `cache-compactor` pass that holds each
/// namespace to its own limits.
@Suite struct NamespaceCommandTests {
  let mediacache = binary("mediacache")
  let compactor = binary("cache-compactor")

  func importObjects(_ cache: String, namespace: String?, count: Int, source: String) async throws {
    for index in 0..<count {
      let arguments =
        ["import", "--cache", cache, "obj-\(index)", source, "--chunk-size", "4096"]
        + (namespace.map { ["--namespace", $0] } ?? [])
      let imported = try await run(mediacache, arguments)
      #expect(imported.status == 0, "\(imported.stderr)")
    }
  }

  func count(_ cache: String, namespace: String?) async throws -> Int {
    let listed = try await run(
      mediacache, ["ls", "--cache", cache, "--json"] + (namespace.map { ["--namespace", $0] } ?? []))
    #expect(listed.status == 0, "\(listed.stderr)")
    return try #require(JSONSerialization.jsonObject(with: listed.stdout) as? [Any]).count
  }

  @Test func onePassHoldsEachNamespaceToItsOwnLimits() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    try randomBytes(count: 100_000, seed: 5).write(to: URL(fileURLWithPath: dir.file("src")))
    try await importObjects(cache, namespace: "image", count: 5, source: dir.file("src"))
    try await importObjects(cache, namespace: "video", count: 3, source: dir.file("src"))
    try await importObjects(cache, namespace: nil, count: 2, source: dir.file("src"))
    #expect(try await count(cache, namespace: "image") == 5)
    #expect(try await count(cache, namespace: "video") == 3)
    #expect(try await count(cache, namespace: nil) == 2, "the root lists its own objects only")
    #expect(FileManager.default.fileExists(atPath: "\(cache)/namespaces/image/FORMAT"))

    let pass = try await run(
      compactor, [cache, "--keep-heads", "off", "--namespace", "image:max-size=250K,max-age=30d", "--json"])
    #expect(pass.status == 0, "\(pass.stderr)")
    let reports = try pass.text.split(separator: "\n").map {
      try decodeReport(PassReport.self, Data($0.utf8))
    }
    #expect(reports.map(\.namespace) == [nil, "image", "video"])
    #expect(reports.allSatisfy { $0.pass == 1 })
    #expect(reports[0].report.evictedCount == 0 && reports[0].report.objectsScanned == 2)
    #expect(reports[1].report.evictedCount == 3 && reports[1].report.bytesAfter <= 250 * 1024)
    #expect(reports[2].report.evictedCount == 0 && reports[2].report.objectsScanned == 3)
    #expect(try await count(cache, namespace: "image") == 2)
    #expect(try await count(cache, namespace: "video") == 3)
    let fsck = try await run(binary("cache-fsck"), [cache])
    #expect(fsck.status == 0, "\(fsck.text)\(fsck.stderr)")

    // The text summary names the namespace.
    let text = try await run(compactor, [cache, "--namespace", "video:max-size=150K"])
    #expect(text.status == 0, "\(text.stderr)")
    let lines = text.text.split(separator: "\n")
    #expect(
      lines.count == 3 && lines[1].hasPrefix("namespace image: pass 1")
        && lines[2].hasPrefix("namespace video: pass 1"))
    #expect(try await count(cache, namespace: "video") == 1)
  }

  @Test func badNamespaceOptionsAreUsageErrorsThatChangeNothing() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    try randomBytes(count: 10_000, seed: 5).write(to: URL(fileURLWithPath: dir.file("src")))
    try await importObjects(cache, namespace: "image", count: 2, source: dir.file("src"))
    for option in [
      "Image:max-size=1K", "image:max-size=lots", "image:color=red", "image:max-size", "../x",
      String(repeating: "n", count: 65),
    ] {
      let result = try await run(compactor, [cache, "--namespace", option])
      #expect(result.status == 64, "\(option): \(result.stderr)")
    }
    let twice = try await run(compactor, [cache, "--namespace", "image:max-size=1", "--namespace", "image"])
    #expect(twice.status == 64 && twice.stderr.contains("given twice"), "\(twice.stderr)")
    for name in ["../escape", "", "UPPER"] {
      let result = try await run(mediacache, ["ls", "--cache", cache, "--namespace", name])
      #expect(result.status == 64 && result.stderr.contains("namespace"), "\(name): \(result.stderr)")
    }
    #expect(try await count(cache, namespace: "image") == 2)
    // A namespace nothing was written to holds nothing.
    let status = try await run(mediacache, ["status", "--cache", cache, "--namespace", "none", "obj-0"])
    #expect(status.status == 0 && status.text == "none\n", "\(status.text)\(status.stderr)")
    #expect(!FileManager.default.fileExists(atPath: "\(cache)/namespaces/none"))
  }
}
