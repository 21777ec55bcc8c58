import Foundation
import MediaCache
import Synchronization

// RFC 9111 for one object: the freshness of its stored response, and its revalidation when stale.
extension ObjectSession {
  /// The freshness of what the object holds now, from its stored response headers (nil: none recorded, as for
  /// an object imported or stored before manifest 1.3: served as fresh).
  var freshness: Freshness? { freshness(of: manager.manifest) }

  /// The freshness of the response `manifest` records (nil: none recorded). Worked out once per stored
  /// response (a hit asks for it twice, and parsing the fields and dates each time cost hits per second).
  func freshness(of manifest: Manifest) -> Freshness? {
    guard let stored = manifest.storedHeaders else { return nil }
    let key = FreshnessKey(
      receivedAt: stored.receivedAt, fieldCount: stored.fields.count, versionTag: manifest.versionTag,
      lastModified: manifest.lastModified)
    if let memo = freshnessMemo.withLock({ $0 }), memo.key == key { return memo.value }
    let configuration = environment.client.configuration
    let value = Freshness(
      stored, lastModified: manifest.lastModified, policy: configuration.freshness,
      shared: configuration.isSharedCache)
    freshnessMemo.withLock { $0 = (key, value) }
    return value
  }

  /// RFC 9111 4.3: if the object holds bytes and they are stale, asks the origin whether they are still
  /// current (a conditional request; one for all readers arriving meanwhile). A `304`, or a response with the
  /// same validators, makes them fresh again (the stored fields updated from it); another version resets the
  /// object (its bytes are fetched again). When the origin cannot be reached or answers 5xx, stale bytes are
  /// served where the response allows it (`Revalidation.staleAfterError`), else the error is thrown.
  /// `evenIfFresh`: checked whatever the copy's freshness (`mayHaveGrown(past:)`).
  func revalidateIfStale(evenIfFresh: Bool = false) async throws -> Revalidation {
    let manifest = manager.manifest
    guard manifest.cachedBytes > 0, let freshness, evenIfFresh || !freshness.isFresh(at: Date()) else {
      return .notNeeded
    }
    if freshness.mayServeStale, environment.outages.isDown(url) { return .staleAfterError }
    let task = revalidation.withLock { running in
      if let running { return running }
      let task = Task {
        defer { self.revalidation.withLock { $0 = nil } }
        return try await self.revalidate(manifest, mayServeStale: freshness.mayServeStale)
      }
      running = task
      return task
    }
    return try await task.value
  }

  /// Whether `range` starts at or past the end of a copy fresh only by the heuristic (RFC 9111 4.2.2): the
  /// origin's file may have grown since (a recording in progress, LL-HLS parts as byte ranges of one file), so
  /// the copy is revalidated before the read is refused as not satisfiable (416), as it would be when stale.
  /// At most once a second an object: a copy checked less than a second ago (a 304 makes its age 0) keeps its
  /// 416, so a client asking past the end in a loop does not make each request an origin round trip.
  func mayHaveGrown(past range: RequestedRange) -> Bool {
    guard let length = manager.contentLength, let freshness, freshness.isHeuristic,
      freshness.age(at: Date()) >= 1
    else { return false }
    if case .bounded(let bounds) = range, bounds.isEmpty { return false }
    return range.resolved(length: length) == nil
  }

  private func revalidate(_ manifest: Manifest, mayServeStale: Bool) async throws -> Revalidation {
    let answer: OriginClient.RevalidationAnswer
    do {
      answer = try await environment.client.revalidate(
        url, etag: manifest.etag, lastModified: manifest.lastModified)
    } catch let error as OriginError {
      // A failure that is not retryable (a 4xx, a TLS failure, a refusal to store) neither starts nor ends an
      // outage: only a usable answer ends one.
      if error.isRetryable {
        environment.outages.noteFailure(url, originWide: error.code != .httpStatus)
        if mayServeStale { return .staleAfterError }
      }
      if case .notStorable = error.kind {
        // The origin now forbids storing it: the stored copy goes too.
        _ = try? await IOExecutor.shared.run { [manager, manifest] in
          try manager.reset(contentLength: nil, etag: nil, lastModified: nil, ifVersion: manifest.versionTag)
        }
      }
      throw error
    }
    environment.outages.noteAnswer(url)
    return try await IOExecutor.shared.run { [self] in try apply(answer, revalidating: manifest) }
  }

  /// Applies the origin's `answer` to a revalidation of the version `manifest` records (on the I/O executor:
  /// it makes blocking calls). Returns what became of the stored bytes.
  func apply(_ answer: OriginClient.RevalidationAnswer, revalidating manifest: Manifest) throws
    -> Revalidation
  {
    switch answer {
    case .notModified(let fields):
      // Another flight may have moved the object to another version meanwhile: the 304 is not about it.
      let current = manager.manifest
      guard current.versionTag == manifest.versionTag else { return .notModified }
      do {
        // (Where a redirect led is the 304's news too: its record replaced, or dropped without one.)
        try manager.setStoredHeaders(
          (current.storedHeaders ?? fields).updated(by: fields).settingResponseURL(fields.responseURL),
          ifVersion: manifest.versionTag)
      } catch let error as StoreError where error.code == .versionChanged {}
      return .notModified
    case .modified(let head):
      // Another flight's answer moved the object to another version meanwhile. Which of the two answers the
      // origin gave last cannot be told, and resetting the object to this one would only drop what the other
      // wrote: the version held stands, and the bytes this revalidation was about are gone either way.
      guard manager.manifest.versionTag == manifest.versionTag else { return .replaced }
      try checkDeclaredLength(
        etag: head.metadata.etag, declared: head.metadata.length, stored: manager.manifest)
      do {
        let tag = try reconcile(head, stored: manager.manifest)
        return tag == manifest.versionTag ? .unchanged : .replaced
      } catch let error as StoreError where error.code == .versionChanged {
        // Moved by another thread between the check above and `reconcile`'s changes: the same case.
        return .replaced
      }
    }
  }
}

/// What identifies a stored response for `ObjectSession.freshnessMemo`: its arrival, its field count, the version.
struct FreshnessKey: Equatable {
  var receivedAt: Date
  var fieldCount: Int
  var versionTag: UInt32
  var lastModified: String?
}
