import Foundation
import MediaCache
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Testing

@testable import MediaCacheHTTP

/// `ObjectSession.reconcile`, which judges an origin response's head against what the cache holds, when two
/// origin requests made before an object changed at the origin are answered with different versions and their
/// heads are checked one after the other (each flight's head is checked on the I/O executor when it arrives).
@Suite struct ReconcileTests {
  static let name = "changing"
  static let size: Int64 = 3 << 20

  /// Runs `body` with a session of the test object (1 MiB chunks) over a fresh cache and test origin.
  func withSession(_ body: (ObjectSession) async throws -> Void) async throws {
    try await withReader(chunkSize: 1 << 20, configuration: .init()) { reader, origin, _ in
      let url = origin.url(.normal, Self.name, size: Int(Self.size))
      let session = try await reader.registry.openSession(url, environment: reader.environment)
      defer { session.endRead() }
      try await body(session)
    }
  }

  /// Judges a `200` of version `version` against what the object holds (resetting it if it holds another) and
  /// writes that version's first chunk; returns the version tag it was written under.
  static func cacheFirstChunk(of version: Int, _ session: ObjectSession) async throws -> UInt32 {
    let manager = session.manager
    let bytes = TestOrigin.bytes(name: name, size: Int(size), version: version, range: 0..<(1 << 20))
    return try await io {
      let tag = try session.reconcile(Self.head(version: version), stored: manager.manifest)
      try bytes.withUnsafeBytes { try manager.write($0, at: 0, ifVersion: tag) }
      return tag
    }
  }

  /// A 206 for `start...` of version `version` of the test object.
  static func head(version: Int, start: Int64 = 0) -> ResponseHead {
    ResponseHead(
      start: start, expectedBodyLength: size - start, isPartial: true,
      metadata: OriginMetadata(
        length: size, etag: TestOrigin.etag(name: name, version: version), lastModified: nil,
        contentType: "video/mp4", headers: nil))
  }

  /// Found by tools/soak in CI (a response under version 1's ETag whose bytes turned to version 0's in the
  /// middle of a chunk): flight A's and flight B's requests both named version 0 (If-Range); the origin changed
  /// between them, so A got version 1 and B version 0. A's head was checked first and reset the object; B's,
  /// judged against the manifest B had started from (version 0), looked unchanged and got the version tag of
  /// the object *now* (A's version 1), so B's version-0 bytes were written into version 1 beside A's, chunks
  /// were completed from both, their CRCs vouched for the mix, and readers got version 0's bytes under version
  /// 1's ETag. Now a head is judged against the version the cache holds when it is checked: B's is refused
  /// (`versionChanged`, so its readers start again) and writes nothing.
  @Test func aHeadOfTheVersionBeforeAResetIsNotWrittenIntoTheNewOne() async throws {
    try await withSession { session in
      let manager = session.manager
      // Version 0 cached in part.
      let first = try await Self.cacheFirstChunk(of: 0, session)
      // Both flights start from this manifest.
      let stored = manager.manifest
      // A: version 1, checked first: the object is reset.
      let a = try await io { try session.reconcile(Self.head(version: 1, start: 1 << 20), stored: stored) }
      #expect(a != first)
      #expect(manager.manifest.etag == TestOrigin.etag(name: Self.name, version: 1))
      // B: version 0 (asked before the change), checked after A's reset: refused.
      let old = TestOrigin.bytes(
        name: Self.name, size: Int(Self.size), version: 0, range: (2 << 20)..<Int(Self.size))
      var refusal: StoreError?
      do {
        try await io {
          let b = try session.reconcile(Self.head(version: 0, start: 2 << 20), stored: stored)
          // (What the bug did with it: version 0's bytes written under version 1's tag.)
          try old.withUnsafeBytes { try manager.write($0, at: 2 << 20, ifVersion: b) }
        }
      } catch let error as StoreError {
        refusal = error
      }
      #expect(refusal?.code == .versionChanged, "\(String(describing: refusal))")
      #expect(manager.manifest.etag == TestOrigin.etag(name: Self.name, version: 1))
      #expect(manager.manifest.versionTag == a)
      #expect(manager.manifest.presentChunks.count == 0)
      #expect(manager.manifest.spans.isEmpty)
      // C: version 1 too, asked before A's reset: written under A's version, with no second reset.
      let c = try await io { try session.reconcile(Self.head(version: 1, start: 2 << 20), stored: stored) }
      #expect(c == a)
      let new = TestOrigin.bytes(
        name: Self.name, size: Int(Self.size), version: 1, range: (2 << 20)..<Int(Self.size))
      try await io { try new.withUnsafeBytes { try manager.write($0, at: 2 << 20, ifVersion: c) } }
      #expect(manager.manifest.isPresent(2))
      let read = try await io { try manager.read((2 << 20)..<Self.size) }
      #expect(read == Data(new))
    }
  }

  /// A revalidation asked the origin about version 0 and got a `200` of version 1; meanwhile another flight's
  /// answer had already moved the object to version 2 and written a chunk of it. Before, the revalidation judged
  /// its answer against the object as it was then (version 2), saw another version and reset the object back to
  /// version 1, dropping version 2's chunk (only a loss: the next flight reset it again). Which answer the origin
  /// gave last cannot be told, so the version held stands: the revalidation reports the stored bytes replaced
  /// and changes nothing.
  @Test func aRevalidationAnsweredAfterAnotherFlightResetTheObjectLeavesItsVersion() async throws {
    try await withSession { session in
      let manager = session.manager
      // Version 0 cached in part; the revalidation starts from it.
      _ = try await Self.cacheFirstChunk(of: 0, session)
      let revalidated = manager.manifest
      // Another flight: version 2, its first chunk written.
      let two = try await Self.cacheFirstChunk(of: 2, session)
      let bytes2 = TestOrigin.bytes(name: Self.name, size: Int(Self.size), version: 2, range: 0..<(1 << 20))
      // The revalidation's answer: version 1.
      let outcome = try await io {
        try session.apply(.modified(Self.head(version: 1)), revalidating: revalidated)
      }
      #expect(outcome == .replaced)
      #expect(manager.manifest.versionTag == two)
      #expect(manager.manifest.etag == TestOrigin.etag(name: Self.name, version: 2))
      #expect(manager.manifest.isPresent(0))
      let read = try await io { try manager.read(0..<(1 << 20)) }
      #expect(read == Data(bytes2))
      // A 304 for version 0 changes nothing of version 2 either.
      let stored = manager.manifest.storedHeaders
      let confirmed = try await io {
        try session.apply(
          .notModified(
            StoredHeaders(receivedAt: Date(), fields: [.init(name: "Cache-Control", value: "max-age=60")])),
          revalidating: revalidated)
      }
      #expect(confirmed == .notModified)
      #expect(manager.manifest.versionTag == two)
      #expect(manager.manifest.storedHeaders == stored)
    }
  }
}

/// Runs `body` on the I/O executor (it makes blocking calls).
private func io<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
  try await IOExecutor.shared.run(body)
}
