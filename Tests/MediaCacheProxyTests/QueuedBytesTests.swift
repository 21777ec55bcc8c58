import MediaCacheHTTP
import MediaCacheTestOrigin
import MediaCacheTestSupport
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Synchronization
import Testing

@testable import MediaCacheProxy

/// Keeps the promises of the writes that reach it (nothing goes further), so that a test decides when a
/// response's "socket" takes its bytes. Counts the body bytes; keeps no reference to them. Used on its channel's
/// loop only.
private final class HeldWrites: ChannelOutboundHandler, @unchecked Sendable {
  typealias OutboundIn = HTTPServerResponsePart
  private var promises: [EventLoopPromise<Void>] = []
  private(set) var bodyBytes = 0

  func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
    if case .body(.byteBuffer(let buffer)) = unwrapOutboundIn(data) { bodyBytes += buffer.readableBytes }
    if let promise { promises.append(promise) }
  }

  func flush(context: ChannelHandlerContext) {}

  /// Completes every write held so far.
  func complete(_ result: Result<Void, any Error>) {
    let held = promises
    promises = []
    for promise in held { promise.completeWith(result) }
  }
}

/// A response's writer against the bound on what all responses hold in NIO (`QueuedBytes`).
@Suite struct QueuedBytesTests {
  static let head = HTTPResponseHead(version: .http1_1, status: .ok)

  static func bytes(_ count: Int) -> ByteBuffer { ByteBuffer(repeating: 7, count: count) }

  /// Waits until `condition` holds (up to 10 s).
  static func waitUntil(_ condition: () async -> Bool) async throws -> Bool {
    for _ in 0..<1000 {
      if await condition() { return true }
      try await Task.sleep(for: .milliseconds(10))
    }
    return false
  }

  @Test(.timeLimit(.minutes(5))) func aWriteWaitsForItsOwnBytesOnlyWhileTheResponsesHoldMoreThanTheirBound()
    async throws
  {
    let queued = QueuedBytes(limit: 1 << 20)
    let heldA = HeldWrites()
    let heldB = HeldWrites()
    let a = await NIOAsyncTestingChannel(handler: heldA)
    let b = await NIOAsyncTestingChannel(handler: heldB)
    let writerA = ProxyBodyWriter(channel: a, head: Self.head, queued: queued)
    let writerB = ProxyBodyWriter(channel: b, head: Self.head, queued: queued)

    // Under the bound a write returns while its bytes still wait in NIO (the socket stays fed).
    try await writerA.write(Self.bytes(256 << 10))
    #expect(queued.count == 256 << 10)
    try await a.testingEventLoop.executeInContext { heldA.complete(.success(())) }
    #expect(queued.count == 0)

    // Another response's client stops reading: 1.5 MiB of it wait, more than the bound.
    for _ in 0..<3 { writerB.writeNow(Self.bytes(512 << 10), endingResponse: false) { _ in } }
    #expect(queued.count == 3 * (512 << 10))
    #expect(queued.isOver)

    // Now a write returns only once its own bytes have been taken...
    let returned = Atomic<Bool>(false)
    let task = Task {
      try await writerA.write(Self.bytes(256 << 10))
      returned.store(true, ordering: .relaxed)
    }
    let arrived = try await Self.waitUntil {
      await (try? a.testingEventLoop.executeInContext { heldA.bodyBytes }) == 512 << 10
    }
    #expect(arrived)
    try await Task.sleep(for: .milliseconds(100))
    let early = returned.load(ordering: .relaxed)
    #expect(!early, "a write returned while over the bound with its bytes untaken")
    // ... and not later: the other response's bytes are still held.
    try await a.testingEventLoop.executeInContext { heldA.complete(.success(())) }
    try await task.value
    let done = returned.load(ordering: .relaxed)
    #expect(done)
    #expect(queued.count == 3 * (512 << 10))

    // That client reads again: under the bound, writes return at once again.
    try await b.testingEventLoop.executeInContext { heldB.complete(.success(())) }
    #expect(queued.count == 0)
    try await writerA.write(Self.bytes(256 << 10))
    #expect(queued.count == 256 << 10)
    // Bytes dropped with their connection count out as well.
    try await a.testingEventLoop.executeInContext {
      heldA.complete(.failure(ChannelError.ioOnClosedChannel))
    }
    #expect(queued.count == 0)
  }

  @Test(.timeLimit(.minutes(5))) func aPieceFromTheCacheIsRecycledWithNoOtherReferenceLeft() async throws {
    // A pool's next read into a buffer still held elsewhere would copy it to a new allocation (NIO's copy on
    // write): nothing the writer keeps (its writes in flight, the response) holds the buffer once NIO is done
    // with it, here while the write still waits for the socket (over the bound, it waits for this very write).
    // (This test loop releases the closures it ran at once; NIO's event loop keeps a batch's closures until the
    // batch ends, which `ReturningBuffer` is for and which this test does not show.)
    let held = HeldWrites()
    let channel = await NIOAsyncTestingChannel(handler: held)
    let writer = ProxyBodyWriter(channel: channel, head: Self.head, queued: QueuedBytes(limit: 1))
    let recycled = Mutex<[ByteBuffer]>([])
    var piece = Self.bytes(1 << 20)
    piece.moveReaderIndex(forwardBy: 100)  // a piece is the part of the read buffer the range asked for
    let storage = piece.withVeryUnsafeBytes { UInt(bitPattern: $0.baseAddress) }
    let handed = Mutex<ByteBuffer?>(consume piece)
    let write = Task {
      let piece = handed.withLock { $0.take() }!
      try await writer.write(
        CachedPiece.disk(consume piece), endingResponse: false,
        recycle: { buffer in recycled.withLock { $0.append(buffer) } })
    }
    let arrived = try await Self.waitUntil {
      await (try? channel.testingEventLoop.executeInContext { held.bodyBytes }) == (1 << 20) - 100
    }
    #expect(arrived)
    // The write waits for the socket; its bytes are taken now, and the buffer is given back on the loop's next
    // turn, while the write may not have returned yet.
    try await channel.testingEventLoop.executeInContext { held.complete(.success(())) }
    await channel.testingEventLoop.run()
    var buffer = try #require(recycled.withLock { $0.popLast() })
    buffer.clear()
    let after = buffer.withVeryUnsafeBytes { UInt(bitPattern: $0.baseAddress) }
    #expect(after == storage, "the recycled buffer was still shared: clearing it allocated new storage")
    try await write.value
  }

  @Test(.timeLimit(.minutes(5))) func aFirstPieceCountsUntilTheBodyTakesItOrTheResponseIsDropped()
    async throws
  {
    // A response reads its first piece before its head goes out, and its body's task writes it later: 256
    // players opening at once would each hold a chunk meanwhile, uncounted, and each see the bound far off.
    try await withReader(chunkSize: 65536, configuration: .init()) { reader, origin, _ in
      let url = origin.url(.normal, "first-piece", size: 200_000)
      let fetched = try await reader.read(url)
      for try await _ in fetched {}
      await fetched.closeAndCommit()
      let queued = QueuedBytes(limit: 1 << 20)
      for taken in [true, false] {
        let bytes = try await reader.read(url)
        defer { bytes.close() }
        var iterator = bytes.makeAsyncIterator()
        let first = try await iterator.nextOwnedPiece(sizing: queued)
        let size = first?.count ?? 0
        // The read's own reservation is given back once it returned: what counts now is the piece.
        #expect(size == 65536 && queued.count == 0)
        var source: PieceSource? = PieceSource(iterator, first: first, queued: queued)
        #expect(queued.count == size)
        if taken {
          let piece = source?.takeFirst()
          #expect(piece?.count == size && queued.count == 0)
        }
        source = nil
        #expect(queued.count == 0, "taken: \(taken)")
      }
    }
  }

  @Test func aReadFromTheCacheIsCountedWhileItRunsAndIsSmallOnceAWholeOneWouldPassTheBound() {
    let chunk = 1 << 20
    let queued = QueuedBytes(limit: 3 * chunk)
    // Three whole chunks fit; each counts from its reservation, before any byte of it is read or written.
    var reservations: [(atMost: Int, reserved: Int)] = []
    for _ in 0..<3 { reservations.append(queued.reserveRead(wanted: chunk)) }
    #expect(reservations.allSatisfy { $0 == (chunk, chunk) })
    #expect(queued.count == 3 * chunk && !queued.isOver && queued.pieceLimit == .max)
    // The next would pass the bound: a small piece, counted as such; other pieces are small too now.
    let small = queued.reserveRead(wanted: chunk)
    #expect(small == (QueuedBytes.smallPiece, QueuedBytes.smallPiece))
    #expect(queued.count == 3 * chunk + QueuedBytes.smallPiece && queued.isOver)
    #expect(queued.pieceLimit == QueuedBytes.smallPiece)
    // A read that wants less than a small piece gets it, counted at its size.
    let tail = queued.reserveRead(wanted: 1000)
    #expect(tail == (1000, 1000))
    for reservation in reservations + [small, tail] { queued.release(reservation.reserved) }
    #expect(queued.count == 0 && queued.pieceLimit == .max)
    // What a read wants counts, not a chunk: the end of a range, a small object.
    #expect(queued.reserveRead(wanted: 5000) == (5000, 5000) && queued.count == 5000)
    queued.release(5000)

    // A read wanting more than the bound (an object stored with large chunks): on an idle server, a piece of
    // the bound's size.
    let large = QueuedBytes(limit: 4 << 20)
    #expect(large.reserveRead(wanted: 16 << 20) == (4 << 20, 4 << 20))
    // No bound: nothing counted, no limit.
    let unbounded = QueuedBytes(limit: 0)
    #expect(unbounded.reserveRead(wanted: chunk) == (.max, 0) && unbounded.pieceLimit == .max)
  }
}
