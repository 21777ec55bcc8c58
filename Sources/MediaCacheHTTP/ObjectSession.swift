import AsyncHTTPClient
import Foundation
import Logging
import MediaCache
import NIOCore
import NIOHTTP1
import Synchronization

/// Everything this process is doing with one object: one shared data manager (so completed chunks are visible
/// to every reader at once) and the flights filling it.
final class ObjectSession: Sendable {
  let url: String
  let manager: FileHandleAssetDataManager
  let environment: SessionEnvironment
  private let flights = Mutex<[Flight]>([])
  /// The revalidation running for this object, which readers arriving meanwhile wait for (one request).
  let revalidation = Mutex<Task<Revalidation, any Error>?>(nil)
  private let selection = RequestLimiter(limit: 1)
  /// The freshness of the stored response last worked out (`freshness(of:)`).
  let freshnessMemo = Mutex<(key: FreshnessKey, value: Freshness)?>(nil)

  init(url: String, manager: FileHandleAssetDataManager, environment: SessionEnvironment) {
    self.url = url
    self.manager = manager
    self.environment = environment
  }

  /// A read is done with the session (see `SessionRegistry.closeSession`).
  func endRead() { environment.registry.closeSession(self) }

  /// Returns once what this process fetched of the object is committed (the session's close, or the flush
  /// after its last read).
  func waitUntilCommitted() async { await environment.cache.closing.wait(for: manager.objectID) }

  var chunkSize: Int { manager.manifest.chunkSize }

  /// A flight that will deliver the byte at `position` soon, joined (attached); a new one if none can.
  /// The new run goes from `position` to the next cached byte, the start of the next flight still fetching (no
  /// two origin requests of this process ever ask for the same byte), or `want`. A foreground reader joining a
  /// background flight promotes it.
  func flight(
    for position: Int64, upTo want: Int64?, priority: ReadPriority = .foreground, evenIfCached: Bool = false,
    windowed: Bool = true
  ) async -> Flight? {
    // One selection at a time, so two readers arriving together share one new flight (the look-up and the
    // registration are separated by awaits on the flights).
    let serialised = (try? await selection.acquire()) != nil
    defer { if serialised { selection.release() } }
    let running = flights.withLock { $0 }
    for flight in running {
      guard let promoted = flight.join(at: position, priority: priority, streaming: windowed) else {
        continue
      }
      if promoted { environment.scheduler.promote(flight.id) }
      return flight
    }
    // A flight that covers the position but has only just started: wait (at most `Flight.warmUp`, once) until
    // its rate tells whether it gets there soon.
    for flight in running {
      guard let remaining = flight.warmUpRemaining(for: position) else { continue }
      try? await Task.sleep(for: remaining)
      if let promoted = flight.join(at: position, priority: priority, streaming: windowed) {
        if promoted { environment.scheduler.promote(flight.id) }
        return flight
      }
      break
    }
    let manifest = manager.manifest
    // The byte may have been cached (by a flight that has ended since) while this reader waited for the
    // selection: it is read from the cache, not fetched twice.
    if !evenIfCached && manifest.cachedRun(at: position) > 0 { return nil }
    // The run starts at the position itself, not at its chunk's start: bytes nobody asked for are not fetched
    // (the chunk's bytes before it stay missing; what arrives is kept as a span until the chunk is whole).
    let start = position
    var end: Int64? = want
    if let length = manifest.contentLength { end = min(end ?? length, length) }
    // Stop before the next byte that is already cached.
    if let cached = manifest.nextCachedByte(from: start + 1, before: end ?? .max) { end = cached }
    // Stop where a flight ahead that is still fetching begins: it brings those bytes (the reader joins it or
    // reads them from the cache when it gets there).
    for other in running where other.start > start && end.map({ other.start < $0 }) ?? true {
      if other.isLive { end = other.start }
    }
    let flight = Flight(
      start: start, end: end, chunkSize: manifest.chunkSize, priority: priority,
      readAhead: environment.abandonedRequestReadAhead, grace: environment.abandonedRequestGrace,
      window: windowed ? environment.originRequestWindow : 0, playerWaits: environment.playerWaits,
      attached: true, timers: environment.client.http.eventLoopGroup)
    // An earlier flight of the same run that is far behind stops where this one starts.
    for other in flights.withLock({ $0 }) where other.start < start { other.limit(to: start) }
    flights.withLock { list in
      list.append(flight)
      if list.count > 64 { list.removeFirst(list.count - 64) }
    }
    let retained = environment.registry.retainSession(forFlightOf: self)
    let first = sendFirstRequest(of: flight, priority: priority)
    let task = Task {
      await self.run(flight, first: first)
      if retained { self.environment.registry.releaseSession(forFlightOf: self) }
    }
    flight.setTask(task)
    return flight
  }

  /// The bytes this process's flights of the object have received and handed over but not yet written (a
  /// response's first bytes, `FlightState.deliverWhileWriting`), with the object version each flight writes
  /// them under: not in the manifest yet, but no read of that version needs the origin for them.
  func bytesBeingWritten() -> [BytesAtHand.InFlight] {
    flights.withLock { $0 }.compactMap(\.bytesBeingWritten)
  }

  /// Cancels every running flight of this object.
  func cancelAll() async {
    for flight in flights.withLock({ $0 }) { flight.cancel() }
  }

  private func forget(_ flight: Flight) {
    flights.withLock { $0.removeAll { $0 === flight } }
  }

  // MARK: Fetching

  /// Fills the flight's run from the origin: retries with backoff on connection errors, 5xx and cut-off
  /// bodies, resuming at the first byte not yet received; resets the object if the origin's version changed.
  private func run(_ flight: Flight, first: FirstRequest?) async {
    let host = RequestScheduler.hostKey(of: url)
    var attempt = 1
    var lastCut: Int64?
    var first = first
    while true {
      do {
        var failure: (any Error)?
        let slot: ReadPriority
        let started: ContinuousClock.Instant
        if let sent = first.take() {
          (slot, started) = (sent.slot, sent.started)
          do { try await follow(sent.request, of: flight) } catch { failure = error }
        } else {
          slot = try await environment.scheduler.acquire(
            id: flight.id, host: host, priority: flight.priority)
          started = ContinuousClock.now
          do {
            try await fetchOnce(flight, isLastAttempt: attempt > environment.maxRetries)
          } catch {
            failure = error
          }
        }
        ReaderMetrics.noteRequest(duration: .now - started, error: failure)
        let result: Result<Void, any Error> = failure.map { .failure($0) } ?? .success(())
        environment.scheduler.release(id: flight.id, host: host, slot: slot)
        if case .failure(let failure) = result,
          case .truncatedBody(let expected, let received, _) = (failure as? OriginError)?.kind
        {
          let judged = manager.manifest
          if received == lastCut, let length = judged.contentLength, length >= expected, received < length {
            // Two responses in a row ended at the same byte short of the length the origin declared: that
            // length is a lie, not a network cut. It is not kept as the object's length (nor the chunks
            // written under it, which were sized by it). The flight fails before the reset, so its readers
            // end with this error rather than with the version change the reset is (`ReadCursor`).
            let lie = OriginError.inconsistentResponse(
              url: url,
              reason: "origin declared \(length) bytes but ends every response after \(received) bytes")
            flight.finish(.failure(lie))
            // Only the version judged: one that another flight's response made since is not this lie's.
            _ = try? await IOExecutor.shared.run { [manager] in
              try manager.reset(
                contentLength: nil, etag: nil, lastModified: nil, ifVersion: judged.versionTag)
            }
            throw lie
          }
          lastCut = received
        }
        try result.get()
        // A windowed flight asks for its next window once a reader gets near (`FlightState.afterRequest`).
        if await flight.awaitNextRequest(objectLength: { [manager] in manager.contentLength }) {
          attempt = 1
          lastCut = nil
          continue
        }
        flight.finish(.success(()))
        forget(flight)
        return
      } catch let error as OriginError where error.isRetryable && attempt <= environment.maxRetries {
        environment.logger.debug(
          "origin request failed; retrying",
          metadata: ["url": "\(url)", "attempt": "\(attempt)", "error": "\(error)"])
        attempt += 1
        let backoff = environment.retryBaseDelay.seconds * pow(2, Double(attempt - 2))
        let jitter = Double.random(in: 0...(backoff / 2))
        do { try await Task.sleep(for: .seconds(backoff + jitter)) } catch {
          flight.finish(.failure(CancellationError()))
          forget(flight)
          return
        }
      } catch {
        environment.logger.debug(
          "origin request failed", metadata: ["url": "\(url)", "attempts": "\(attempt)", "error": "\(error)"])
        let judged = manager.manifest.versionTag
        flight.finish(.failure(Self.withAttempts(error, attempt)))
        if (error as? OriginError)?.code == .notStorable {
          // The origin forbids storing the object now: what was stored of it goes too (after the flight
          // failed, as above), unless another flight's response made a new version of it meanwhile.
          _ = try? await IOExecutor.shared.run { [manager] in
            try manager.reset(contentLength: nil, etag: nil, lastModified: nil, ifVersion: judged)
          }
        }
        forget(flight)
        return
      }
    }
  }

  static func withAttempts(_ error: any Error, _ attempts: Int) -> any Error {
    guard var failure = error as? OriginError else { return error }
    switch failure.kind {
    case .httpStatus(let status, _): failure.kind = .httpStatus(status: status, attempts: attempts)
    case .connectionFailed(let reason, _):
      failure.kind = .connectionFailed(reason: reason, attempts: attempts)
    case .timedOut(let reason, _): failure.kind = .timedOut(reason: reason, attempts: attempts)
    case .truncatedBody(let expected, let received, _):
      failure.kind = .truncatedBody(expected: expected, received: received, attempts: attempts)
    default: return error
    }
    return failure
  }

  /// A new flight's first origin request, sent by the reader that made the flight when the scheduler has a
  /// slot free now, not by the flight's task: that task starts on the cooperative pool, and the wake of one of
  /// its threads (0.1–0.2 ms on a 2-CPU virtual machine) then comes while the request is on its way instead of
  /// before it leaves. nil: the task asks for a slot and sends the request itself (also when this one could not
  /// be made; the task then meets the same error and reports it).
  private func sendFirstRequest(of flight: Flight, priority: ReadPriority) -> FirstRequest? {
    let host = RequestScheduler.hostKey(of: url)
    guard let slot = environment.scheduler.tryAcquire(id: flight.id, host: host, priority: priority) else {
      return nil
    }
    let started = ContinuousClock.now
    let request = try? sendRequest(
      flight, from: flight.start, to: flight.firstRequestEnd, isLastAttempt: environment.maxRetries < 1)
    guard let request else {
      environment.scheduler.release(id: flight.id, host: host, slot: slot)
      return nil
    }
    return FirstRequest(slot: slot, started: started, request: request)
  }

  private func fetchOnce(_ flight: Flight, isLastAttempt: Bool) async throws {
    try Task.checkCancellation()
    let position = flight.received
    let end = flight.nextRequestEnd()
    guard let request = try sendRequest(flight, from: position, to: end, isLastAttempt: isLastAttempt) else {
      return
    }
    try await follow(request, of: flight)
  }

  /// Throws `OriginError.inconsistentResponse` if a response under the stored strong entity tag declares
  /// another total length (Content-Range total of a 206, Content-Length of a 200) than the one recorded: a
  /// strong tag names the bytes exactly, so that is a contradiction, not a new version. Neither length can be
  /// trusted, so the object is reset to know neither (nor the chunks sized by it). Checked before the range
  /// itself, so even a response that is refused for its range is noticed.
  func checkDeclaredLength(status: HTTPResponseStatus, headers: HTTPHeaders, stored: Manifest) throws {
    let declared: Int64? =
      switch status.code {
      case 206: headers.first(name: "Content-Range").flatMap { OriginClient.parseContentRange($0)?.total }
      case 200: headers.first(name: "Content-Length").flatMap { Int64($0) }
      default: nil
      }
    try checkDeclaredLength(etag: headers.first(name: "ETag"), declared: declared, stored: stored)
  }

  /// `checkDeclaredLength(status:headers:stored:)` for an entity tag and a declared total length.
  func checkDeclaredLength(etag: String?, declared: Int64?, stored: Manifest) throws {
    guard let etag, !etag.hasPrefix("W/"), stored.etag == etag, let known = stored.contentLength,
      let declared, declared != known
    else { return }
    // (Not if another response reset the object meanwhile: the contradiction is about the version stored.)
    do {
      try manager.reset(contentLength: nil, etag: nil, lastModified: nil, ifVersion: stored.versionTag)
    } catch let error as StoreError where error.code == .versionChanged {}
    throw OriginError.inconsistentResponse(
      url: url, reason: "origin gave length \(declared) under ETag \(etag), which had length \(known)")
  }

  /// Compares the response with what the cache holds: records validators for a new object, resets the object
  /// when the origin's version changed. Returns the version tag the body must be written under.
  ///
  /// `stored` is the manifest the request was made from (its `If-Range`). When the object moved to another
  /// version since (another flight's response reset it, on this executor, between this request and its head),
  /// the response is judged against the version held now: the same version is written under its tag, another
  /// one (an answer the origin gave before it changed) is refused with `StoreError.versionChanged` and writes
  /// nothing, so its readers start again from what the cache holds. Every change here is made only while the
  /// object is still at the version judged (`ifVersion`): a reset by another thread in between refuses this
  /// response rather than mixing two versions' bytes in one object.
  func reconcile(_ response: ResponseHead, stored: Manifest) throws -> UInt32 {
    let metadata = response.metadata
    let current = manager.manifest
    let base = current.versionTag == stored.versionTag ? stored : current
    let tag = base.versionTag
    func differs<T: Equatable>(_ a: T?, _ b: T?) -> Bool { a != nil && b != nil && a != b }
    // A different entity tag, length or (without tags) Last-Modified is another version. A 200 whose
    // validators match is an origin that ignores Range: same version, the body starts at 0.
    let changed =
      differs(base.etag, metadata.etag) || differs(base.contentLength, metadata.length)
      || (base.etag == nil && differs(base.lastModified, metadata.lastModified))
    if changed {
      guard tag == stored.versionTag else {
        throw StoreError.versionChanged(manager.objectID, expected: stored.versionTag, current: tag)
      }
      let new = try manager.reset(
        contentLength: metadata.length, etag: metadata.etag, lastModified: metadata.lastModified,
        ifVersion: tag)
      try manager.setContentType(metadata.contentType, ifVersion: new)
      if let headers = metadata.headers { try manager.setStoredHeaders(headers, ifVersion: new) }
      return new
    }
    // The latest response's fields are the object's (RFC 9111 3.4: a new response updates the stored one's).
    if let headers = metadata.headers { try manager.setStoredHeaders(headers, ifVersion: tag) }
    try manager.setValidators(etag: metadata.etag, lastModified: metadata.lastModified, ifVersion: tag)
    if base.contentType == nil, let type = metadata.contentType {
      try manager.setContentType(type, ifVersion: tag)
    }
    if let length = metadata.length, base.contentLength == nil {
      do { try manager.setContentLength(length, ifVersion: tag) } catch let error as StoreError
        where error.code == .lengthConflict
      {
        throw OriginError.inconsistentResponse(url: url, reason: "length changed without a new validator")
      }
    }
    // A reset by another thread after the changes above: this answer is not of the version held now (its
    // body's writes would be refused too).
    guard manager.manifest.versionTag == tag else {
      throw StoreError.versionChanged(manager.objectID, expected: tag, current: manager.manifest.versionTag)
    }
    return tag
  }
}
