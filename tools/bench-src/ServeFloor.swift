// `serve-floor`: the least a server must do to answer range requests of a cached object while keeping
// invariant 1 (every byte sent passed the CRC of the verification unit that holds it), for `tools/bench` to
// measure beside the proxy and nginx in the `serve` case. For each request it `pread`s every whole unit the
// range touches straight into the response buffer, checks each unit's CRC-32 against the one computed at
// startup (as a manifest lists them), and sends the slice asked for: one copy into user space, one CRC pass
// over the units, one write. No cache logic, no locks, no hops: the reads run on the event loop itself (which
// the proxy must not do, except with a read that cannot wait for the disk). The unit is the proxy's once its
// chunks were verified whole: 16 KiB blocks (`BlockCRCTable`); `--unit 1048576` gives the floor of whole 1 MiB
// chunks (an unaligned 1 MiB range reads and checks 2 MiB, a 64 KiB range 1 MiB). nginx reads neither. The proxy's figures cannot beat this server's,
// so its ratio to nginx bounds the proxy's.
//
//   mediacache-bench serve-floor --file PATH [--unit N] [--threads N]
//       prints "listening on http://127.0.0.1:PORT", serves the file at any path until killed

import ArgumentParser
import Foundation
import MediaCache
import NIOCore
import NIOHTTP1
import NIOPosix

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The object served: its descriptor, length, chunk size and the CRC of every chunk.
private struct FloorObject: Sendable {
  let fd: Int32
  let size: Int64
  let chunkSize: Int
  let crcs: [UInt32]

  init(path: String, chunkSize: Int) throws {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { throw BenchError("cannot open \(path): errno \(errno)") }
    let size = Int64(lseek(fd, 0, SEEK_END))
    var crcs: [UInt32] = []
    var scratch = [UInt8](repeating: 0, count: chunkSize)
    var offset: Int64 = 0
    while offset < size {
      let count = scratch.withUnsafeMutableBytes { pread(fd, $0.baseAddress, chunkSize, off_t(offset)) }
      guard count > 0 else { throw BenchError("cannot read \(path) at \(offset)") }
      crcs.append(scratch.withUnsafeBytes { CRC32.checksum(UnsafeRawBufferPointer(rebasing: $0[..<count])) })
      offset += Int64(count)
    }
    (self.fd, self.size, self.chunkSize, self.crcs) = (fd, size, chunkSize, crcs)
  }

  /// The verified bytes `range` (inclusive bounds, within the object), or nil when a chunk fails its CRC or
  /// cannot be read.
  func read(_ first: Int64, _ last: Int64, allocator: ByteBufferAllocator) -> ByteBuffer? {
    let firstChunk = Int(first / Int64(chunkSize))
    let lastChunk = Int(last / Int64(chunkSize))
    let start = Int64(firstChunk) * Int64(chunkSize)
    let end = min(size, Int64(lastChunk + 1) * Int64(chunkSize))
    var buffer = allocator.buffer(capacity: Int(end - start))
    for chunk in firstChunk...lastChunk {
      let offset = Int64(chunk) * Int64(chunkSize)
      let length = Int(min(Int64(chunkSize), size - offset))
      let ok = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: length) { target in
        let read = pread(fd, target.baseAddress, length, off_t(offset))
        guard read == length else { return -1 }
        let crc = CRC32.checksum(UnsafeRawBufferPointer(rebasing: target[..<length]))
        return crc == crcs[chunk] ? length : -1
      }
      guard ok == length else { return nil }
    }
    return buffer.getSlice(at: Int(first - start), length: Int(last - first + 1))
  }
}

/// Parses `bytes=A-B` / `bytes=A-` (one range); nil for anything else.
private func parseRange(_ value: String?, size: Int64) -> (Int64, Int64)? {
  guard let value, value.hasPrefix("bytes=") else { return nil }
  let parts = value.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)
  guard parts.count == 2, let first = Int64(parts[0]), first < size else { return nil }
  let last = parts[1].isEmpty ? size - 1 : min(Int64(parts[1]) ?? -1, size - 1)
  return last >= first ? (first, last) : nil
}

private final class ServeFloorHandler: FloorConnectionHandler {
  typealias InboundIn = HTTPServerRequestPart
  typealias OutboundOut = HTTPServerResponsePart
  let object: FloorObject
  var range: (Int64, Int64)?
  var keepAlive = true

  init(object: FloorObject) { self.object = object }

  func channelRead(context: ChannelHandlerContext, data: NIOAny) {
    switch unwrapInboundIn(data) {
    case .head(let head):
      range = parseRange(head.headers.first(name: "Range"), size: object.size) ?? (0, object.size - 1)
      keepAlive = head.isKeepAlive
    case .body: break
    case .end:
      let (first, last) = range ?? (0, object.size - 1)
      var head = HTTPResponseHead(version: .http1_1, status: .partialContent)
      guard let body = object.read(first, last, allocator: context.channel.allocator) else {
        head.status = .internalServerError
        head.headers.add(name: "Content-Length", value: "0")
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        endResponse(context, keepAlive: keepAlive)
        return
      }
      head.headers.add(name: "Content-Length", value: String(body.readableBytes))
      head.headers.add(name: "Content-Range", value: "bytes \(first)-\(last)/\(object.size)")
      context.write(wrapOutboundOut(.head(head)), promise: nil)
      context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
      endResponse(context, keepAlive: keepAlive)
    }
  }
}

struct ServeFloorCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "serve-floor",
    abstract: "A minimal SwiftNIO server answering ranges of a file with whole units read and CRC-checked.",
    discussion: """
      The floor that verification by units puts under the proxy's serving figures \
      (tools/bench-src/ServeFloor.swift).
      """)

  @Option(help: "The file served (at every path).") var file: String
  @Option(help: "Bytes per verification unit (the proxy's blocks: 16 KiB).") var unit = 16 << 10
  @Option(help: "Event loops (nginx in tools/bench runs one worker).") var threads = 1

  func run() async throws {
    let object = try FloorObject(path: file, chunkSize: unit)
    try await serveMinimalHTTP(threads: threads) { ServeFloorHandler(object: object) }
  }
}
