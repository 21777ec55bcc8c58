import ArgumentParser
import Foundation
import MediaCache

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The fixed example manifest of docs/FORMAT.md: a 20000-byte object in 4 KiB chunks (5 chunks, the last 3616
/// bytes), of which chunks 0, 1 and 3 are present, pinned, version tag 0x1234ABCD (as after a reset), with a
/// content type, an ETag, a Last-Modified and two bytes of user metadata. The byte at offset `o` is
/// `o ^ (o >> 12)` truncated to 8 bits (so each chunk differs); the CRCs are those of these bytes.
func exampleManifest() -> Manifest {
  let id = CacheKey("https://example.com/clip.mp4").objectID
  var manifest = Manifest(
    objectID: id, chunkSize: 4096, contentLength: 20000,
    createdAt: Date(timeIntervalSince1970: 1_700_000_000.123), contentType: "video/mp4", etag: "\"v1\"",
    lastModified: "Tue, 14 Nov 2023 22:13:20 GMT", isPinned: true, userMetadata: Data("hi".utf8))
  manifest.versionTag = 0x1234_ABCD
  for index in [0, 1, 3] {
    let range = manifest.byteRange(ofChunk: index)
    let bytes = range.map { UInt8(truncatingIfNeeded: $0 ^ ($0 >> 12)) }
    manifest.setChunk(index, crc: CRC32.checksum(bytes))
  }
  return manifest
}

func hexDump(_ bytes: [UInt8]) -> [String] {
  stride(from: 0, to: bytes.count, by: 16).map { start in
    let row = bytes[start..<min(start + 16, bytes.count)]
    var hex = ""
    for (offset, byte) in row.enumerated() {
      hex += String(format: "%02x ", byte)
      if offset == 7 { hex += " " }
    }
    let ascii = String(row.map { (0x20..<0x7f).contains($0) ? Character(UnicodeScalar($0)) : "." })
    return String(format: "%08x  ", start) + hex.padding(toLength: 50, withPad: " ", startingAt: 0)
      + "|\(ascii)|"
  }
}

/// Walks the bytes by the layout of docs/FORMAT.md (not through the decoder) and names each field.
func fieldWalk(_ bytes: [UInt8]) -> [String] {
  var lines: [String] = []
  var offset = 0
  func integer(_ size: Int) -> UInt64 {
    var value: UInt64 = 0
    for index in 0..<size { value |= UInt64(bytes[offset + index]) << (8 * index) }
    return value
  }
  func field(_ size: Int, _ name: String, _ value: String) {
    let hex = bytes[offset..<(offset + size)].map { String(format: "%02x", $0) }.joined(separator: " ")
    let shown = size > 12 ? String(hex.prefix(35)) + " …" : hex
    lines.append(
      String(format: "%4d  %4d  ", offset, size) + name.padding(toLength: 22, withPad: " ", startingAt: 0)
        + shown.padding(toLength: 38, withPad: " ", startingAt: 0) + value)
    offset += size
  }
  func text(_ size: Int) -> String { String(decoding: bytes[offset..<(offset + size)], as: UTF8.self) }
  lines.append("  off  size  field                 bytes                                 value")
  field(4, "magic", text(4))
  field(1, "major version", String(integer(1)))
  field(1, "minor version", String(integer(1)))
  let flags = integer(2)
  field(
    2, "flags", "0x\(String(flags, radix: 16)) (pinned \(flags & 1 != 0), length known \(flags & 2 != 0))")
  field(32, "object id", bytes[8..<40].map { String(format: "%02x", $0) }.joined())
  field(8, "content length", String(integer(8)))
  field(4, "chunk size", String(integer(4)))
  field(4, "version tag", String(format: "0x%08x", integer(4)))
  field(8, "created (ms)", String(integer(8)))
  let runs = Int(integer(4))
  field(4, "run count", String(runs))
  let present = Int(integer(4))
  field(4, "present chunk count", String(present))
  var indices: [UInt64] = []
  for run in 0..<runs {
    let first = integer(4)
    field(4, "run \(run) first chunk", String(first))
    let count = integer(4)
    field(4, "run \(run) chunk count", String(count))
    indices += (first..<(first + count))
  }
  for index in indices { field(4, "CRC of chunk \(index)", String(format: "0x%08x", integer(4))) }
  var size = Int(integer(1))
  field(1, "content type length", String(size))
  if size > 0 { field(size, "content type", text(size)) }
  size = Int(integer(2))
  field(2, "ETag length", String(size))
  if size > 0 { field(size, "ETag", text(size)) }
  size = Int(integer(1))
  field(1, "Last-Modified length", String(size))
  if size > 0 { field(size, "Last-Modified", text(size)) }
  size = Int(integer(4))
  field(4, "user metadata length", String(size))
  if size > 0 { field(size, "user metadata", text(size)) }
  let computed = CRC32.checksum(Array(bytes[..<offset]))
  field(
    4, "manifest CRC-32",
    String(format: "0x%08x (computed over bytes 0..<%d: 0x%08x)", integer(4), offset, computed))
  if offset != bytes.count { lines.append("(\(bytes.count - offset) bytes not accounted for)") }
  return lines
}

struct DumpExampleManifestCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "dump-example-manifest",
    abstract: "Print a hex dump and field walk of a fixed example manifest made by ManifestCodec.encode.")

  func run() throws {
    let manifest = exampleManifest()
    let bytes = [UInt8](try ManifestCodec.encode(manifest))
    let decoded = try ManifestCodec.decode(Data(bytes), expectedID: manifest.objectID)
    guard decoded == manifest else { throw BenchError("the example manifest does not survive a decode") }
    print("key \"https://example.com/clip.mp4\" -> object id \(manifest.objectID.hex)")
    print("\(bytes.count) bytes:")
    for line in hexDump(bytes) { print(line) }
    print("")
    for line in fieldWalk(bytes) { print(line) }
  }
}
