import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheProxy
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Testing

/// Players that stop reading: a paused browser tab keeps its connection open and reads nothing more, so the
/// proxy's write for it waits on a full socket. Such a response must hold nothing that other responses wait
/// for. Until 2026-12-05 it held its last piece's share of the read budget (`cacheReadBudget`): 64 paused
/// players of a cached object held all of it, and every other response streamed from the cache waited as long
/// as they stayed paused.
@Suite(.serialized)
struct PausedPlayerTests {
  static let chunkSize = 65536

  @Test func pausedPlayersHoldNoReadBudgetThatOtherResponsesWaitFor() async throws {
    var configuration = CachingReader.Configuration()
    // Four chunks: four responses that held their piece's share while paused would hold all of it.
    configuration.cacheReadBudget = Int64(4 * Self.chunkSize)
    try await withReader(chunkSize: Self.chunkSize, configuration: configuration) { reader, origin, _ in
      let size = 24 << 20
      let url = origin.url(.normal, "paused", size: size)
      let (_, endpoint, server) = try await startInProcessProxy(reader)
      defer { server.cancel() }
      let path = ProxyServer.proxyPath(for: url)
      let expected = TestOrigin.bytes(name: "paused", size: size)
      // Cached whole first, so that every response below is read from the cache.
      let filled = try await blocking { try rawRequest(port: endpoint.port, path) }
      #expect(filled.status == 200 && filled.body == expected)

      // Twelve players ask for the whole object and read nothing: each response fills its socket's buffers
      // and waits on its write.
      var paused: [RawHTTPConnection] = []
      defer { for connection in paused { connection.close() } }
      for _ in 0..<12 {
        let connection = try RawHTTPConnection(port: endpoint.port)
        try connection.sendRequest("GET", path)
        paused.append(connection)
      }
      try await Task.sleep(for: .milliseconds(500))

      // Other players are answered in full meanwhile: the whole object (streamed from the cache, read in
      // pieces under the budget) and a range of many chunks. A response waiting for budget held by the paused
      // ones would end in the raw client's receive timeout instead.
      for _ in 0..<2 {
        let whole = try await blocking {
          let connection = try RawHTTPConnection(port: endpoint.port, timeoutSeconds: 15)
          defer { connection.close() }
          try connection.sendRequest("GET", path)
          return try connection.readResponse()
        }
        #expect(whole.status == 200 && whole.isComplete && whole.body == expected)
        let range = try await blocking {
          try rawRequest(port: endpoint.port, path, headers: [("Range", "bytes=1000-3000999")])
        }
        #expect(range.status == 206 && range.body == Array(expected[1000..<3_001_000]))
      }

      // The paused players still get their bytes, whole, once they read.
      for connection in paused.prefix(2) {
        nonisolated(unsafe) let unpaused = connection  // used by one thread at a time: here, then the closure
        let response = try await blocking { try unpaused.readResponse() }
        #expect(response.status == 200 && response.body == expected)
      }
    }
  }

  /// While the proxy's responses hold more than their bound, each reads small pieces
  /// (`QueuedBytes.smallPiece`), so that one waiting on a paused player holds that much, not a chunk: a
  /// read asked for at most N bytes returns pieces of at most N bytes, in buffers about their size, and the
  /// same bytes, both when its chunks are read and verified whole (the first read of a copy of the cache, whose
  /// files no block CRC is known for) and when only the blocks holding a piece are (the second).
  @Test func aReadAskedForSmallPiecesHoldsSmallBuffers() async throws {
    let chunkSize = 1 << 20
    let size = 3 * chunkSize + 12345
    let copy = try TemporaryDirectory()
    defer { copy.cleanup() }
    var url = ""
    try await withReader(chunkSize: chunkSize, configuration: .init()) { reader, origin, cache in
      url = origin.url(.normal, "small-pieces", size: size)
      let fetched = try await reader.read(url)
      var all = Data()
      for try await piece in fetched { all.append(piece) }
      await fetched.closeAndCommit()
      #expect(Array(all) == TestOrigin.bytes(name: "small-pieces", size: size))
      await reader.cache.closing.wait(for: reader.cache.objectID(for: url))
      try FileManager.default.copyItem(
        atPath: cache.configuration.directory.string, toPath: copy.file("cache"))
    }
    // The origin is gone: every byte below comes from the copy.
    let cache = try MediaCache(
      configuration: .init(
        directory: FilePath(copy.file("cache")), chunkSize: chunkSize, durability: .relaxed))
    let client = OriginClient()
    let reader = CachingReader(cache: cache, client: client)
    let expected = TestOrigin.bytes(name: "small-pieces", size: size)
    func readTwice() async throws {
      for _ in 0..<2 {
        let bytes = try await reader.read(url, range: .bounded(100..<Int64(size - 7)))
        defer { bytes.close() }
        var iterator = bytes.makeAsyncIterator()
        var read: [UInt8] = []
        var pieces = 0
        while let piece = try await iterator.nextOwnedPiece(atMost: 40_000) {
          guard case .disk(let buffer) = piece else {
            Issue.record("a piece of a cached object came from the origin")
            break
          }
          #expect(buffer.readableBytes <= 40_000)
          #expect(
            buffer.capacity <= 64 << 10, "a piece of \(buffer.readableBytes) bytes holds \(buffer.capacity)")
          read += buffer.readableBytesView
          pieces += 1
        }
        #expect(read == Array(expected[100..<(size - 7)]))
        #expect(pieces >= (size - 107) / 40_000)
      }
    }
    do {
      try await readTwice()
    } catch {
      try? await client.shutdown()
      throw error
    }
    try await client.shutdown()
  }
}
