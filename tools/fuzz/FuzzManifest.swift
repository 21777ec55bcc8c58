// libFuzzer target for the manifest decoder (`ManifestCodec.decode`). Built and run by
// `tools/fuzz/run manifest`; see tools/fuzz/README.md.
//
// For every input the decoder must either throw a `ManifestError` or return a manifest that
//   1. the encoder accepts,
//   2. survives decode(encode(m)) == m,
//   3. re-encodes to the input bytes exactly when its minor version is the one the encoder writes for it (0
//      without spans, 1 with them: both canonical), and otherwise to the input with that minor version and the
//      bytes the encoder does not write (an empty span list, a later minor's fields) dropped (FORMAT.md 3.5),
//   4. decodes the same through the `Data` overload with its own id as `expectedID`, and is refused with
//      `objectIDMismatch` for any other id,
//   5. never lists bytes past its known content length.
// A violated property ends in `fatalError`, which libFuzzer reports as a crash and saves the input.
//
// Because the decoder checks the trailing CRC-32 before any field, a custom mutator rewrites the last four
// bytes of 15 of 16 mutated inputs with the CRC of the bytes before them, so mutations reach the field parser.
// Saved crash inputs are therefore ordinary manifest files that `ManifestCodec.decode` can be called on.

import CLibFuzzer
import Foundation
import MediaCache

/// libFuzzer's entry point: runs one input (`size` bytes at `data`) and returns 0; a violated property traps.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
  // The decoder reads straight from libFuzzer's buffer, which is allocated to exactly `size` bytes, so
  // AddressSanitizer catches any read past the end.
  let raw = UnsafeRawBufferPointer(start: data, count: size)
  let manifest: Manifest
  do {
    manifest = try ManifestCodec.decode(raw)
  } catch {
    // Every refusal must be describable without trapping (it ends up in logs and CLI output).
    _ = error.description
    return 0
  }
  checkAccepted(manifest, raw)
  return 0
}

/// The properties of a manifest the decoder accepted from `raw`.
func checkAccepted(_ manifest: Manifest, _ raw: UnsafeRawBufferPointer) {
  // 1. The encoder takes everything the decoder accepts.
  let encoded: Data
  do {
    encoded = try ManifestCodec.encode(manifest)
  } catch {
    fatalError("decoder accepted a manifest that the encoder refuses: \(error); manifest: \(manifest)")
  }

  // 2. Round trip.
  let again: Manifest
  do {
    again = try ManifestCodec.decode(encoded)
  } catch {
    fatalError("decode(encode(m)) threw \(error); manifest: \(manifest)")
  }
  guard again == manifest else {
    fatalError("decode(encode(m)) != m:\n  m:     \(manifest)\n  again: \(again)")
  }

  // 3. Canonical bytes. A manifest is written at the oldest minor version that holds what it has: 1.3 with
  //    stored headers, else 1.2 with a group, else 1.1 with spans, else 1.0. Written at the minor version it
  //    came in: identical. Otherwise: the same up to the end of the fields the writer knows (user metadata,
  //    then any spans, group and stored headers), with the minor version it writes, and a fresh CRC (the
  //    writer drops the fields it does not know, an empty span list, an empty group and empty stored headers).
  let minor = raw[5]
  let writtenMinor: UInt8 =
    manifest.storedHeaders != nil ? 3 : manifest.group != nil ? 2 : manifest.allSpans.isEmpty ? 0 : 1
  let expectedBodyCount = encoded.count - 4
  if minor == writtenMinor {
    guard encoded.elementsEqual(raw) else {
      fatalError(
        "encode(decode(b)) != b for a minor-\(minor) manifest (\(raw.count) bytes in, \(encoded.count) out)")
    }
  } else {
    guard expectedBodyCount <= raw.count - 4 else {
      fatalError(
        "re-encoding a minor-\(minor) manifest grew it: \(raw.count - 4) body bytes in, \(expectedBodyCount) out"
      )
    }
    for index in 0..<expectedBodyCount {
      let want = index == 5 ? writtenMinor : raw[index]
      guard encoded[encoded.startIndex + index] == want else {
        fatalError("re-encoding a minor-\(minor) manifest changed byte \(index)")
      }
    }
  }

  // 4. The `Data` overload and the expected-id check.
  do {
    let withID = try ManifestCodec.decode(Data(raw), expectedID: manifest.objectID)
    guard withID == manifest else {
      fatalError("decode(_: Data, expectedID: own id) differs from decode(raw)")
    }
  } catch {
    fatalError("decode(_: Data, expectedID: own id) threw \(error)")
  }
  var otherBytes = manifest.objectID.bytes
  otherBytes[31] ^= 0x01
  let otherID = ObjectID(bytes: otherBytes)!
  do {
    _ = try ManifestCodec.decode(Data(raw), expectedID: otherID)
    fatalError("a manifest was accepted for another object id")
  } catch {
    guard error.code == .objectIDMismatch, error.description.contains("\(otherID)"),
      error.description.contains("\(manifest.objectID)")
    else { fatalError("expected objectIDMismatch for another id, got \(error)") }
  }

  // 5. Derived values of a decoded manifest are computable and consistent.
  let cached = manifest.cachedBytes
  guard cached >= 0 else { fatalError("cachedBytes \(cached) < 0") }
  if let length = manifest.contentLength {
    guard cached <= length else { fatalError("cachedBytes \(cached) exceeds the content length \(length)") }
    if manifest.isComplete {
      guard cached == length else { fatalError("complete, but \(cached) of \(length)") }
    }
  }
}

// MARK: - Custom mutator

/// libFuzzer's custom mutator: mutates the input in place (at most `maxSize` bytes) and returns its new size.
@_cdecl("LLVMFuzzerCustomMutator")
public func customMutator(
  _ data: UnsafeMutablePointer<UInt8>, _ size: Int, _ maxSize: Int, _ seed: UInt32
) -> Int {
  let newSize = LLVMFuzzerMutate(data, size, maxSize)
  // One in 16 mutants keeps whatever CRC it has, so the magic, version, size and CRC checks stay covered.
  if newSize >= 8 && seed % 16 != 0 {
    let body = UnsafeRawBufferPointer(start: data, count: newSize - 4)
    var crc = CRC32.checksum(body).littleEndian
    withUnsafeBytes(of: &crc) { bytes in
      UnsafeMutableRawBufferPointer(start: data + (newSize - 4), count: 4).copyMemory(from: bytes)
    }
  }
  return newSize
}

// MARK: - Seeds

/// With `MEDIACACHE_FUZZ_WRITE_SEEDS=<dir>`, writes the committed seed manifests (tools/fuzz/seeds/manifest)
/// with the real encoder and exits. See tools/fuzz/README.md.
@_cdecl("LLVMFuzzerInitialize")
public func initialize(
  _ argc: UnsafeMutablePointer<Int32>,
  _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> Int32 {
  guard let directory = ProcessInfo.processInfo.environment["MEDIACACHE_FUZZ_WRITE_SEEDS"] else { return 0 }
  writeSeeds(to: directory)
  exit(0)
}

func writeSeeds(to directory: String) {
  do {
    for (name, bytes) in try seedManifests() {
      let url = URL(fileURLWithPath: directory).appendingPathComponent(name)
      try bytes.write(to: url)
      print("wrote \(url.path) (\(bytes.count) bytes)")
    }
  } catch {
    fatalError("writing seeds: \(error)")
  }
}

/// Small manifests that between them set every field, both length modes, the limits of the ranges the decoder
/// checks, and a newer minor version with extra bytes.
func seedManifests() throws -> [(String, Data)] {
  var seeds: [(String, Data)] = []

  // The smallest manifest: empty object, no runs, no strings (84 bytes).
  let minimal = Manifest(
    objectID: ObjectID(CacheKey("seed:minimal")), chunkSize: Manifest.minChunkSize, contentLength: 0,
    createdAt: Date(timeIntervalSince1970: 0))
  seeds.append(("minimal.manifest", try ManifestCodec.encode(minimal)))

  // Unknown length, runs up to the last encodable chunk index (2^32 - 2), all-ones version tag, weak ETag.
  var live = Manifest(
    objectID: ObjectID(CacheKey("https://example.com/live.ts")), chunkSize: 1 << 20,
    createdAt: Date(timeIntervalSince1970: 1_650_000_000.25), contentType: "video/mp2t", etag: "W/\"7\"",
    userMetadata: Data([0x00, 0xFF, 0x10, 0x80]))
  for index in [0, 1, 2, 70, 71, 40_000, Int(UInt32.max) - 2, Int(UInt32.max) - 1] {
    live.setChunk(index, crc: UInt32(truncatingIfNeeded: index &* 31 &+ 5))
  }
  live.versionTag = 0xFFFF_FFFF
  seeds.append(("unknown-length.manifest", try ManifestCodec.encode(live)))

  // Known length with a short last chunk and every chunk present, a chunk size that is no power of two, the
  // largest creation time (2^50 ms), pinned, non-ASCII text, CRCs 0, 1 and 0xFFFFFFFF.
  var complete = Manifest(
    objectID: ObjectID(CacheKey("seed:complete")), chunkSize: 5000, contentLength: 12_345,
    createdAt: Date(timeIntervalSince1970: Double(1 << 50) / 1000), contentType: "vidéo/mp4",
    lastModified: "Wed, 21 Oct 2015 07:28:00 GMT", isPinned: true)
  for index in 0..<3 { complete.setChunk(index, crc: [0, 1, 0xFFFF_FFFF][index]) }
  complete.versionTag = 0x600D_F00D
  seeds.append(("complete.manifest", try ManifestCodec.encode(complete)))

  // Minor version 1 with 5 extra bytes before the CRC (a 1.0 reader ignores them).
  var newer = Array(try ManifestCodec.encode(complete).dropLast(4))
  newer[5] = 1
  newer.append(contentsOf: [0x01, 0x02, 0x03, 0x04, 0x05])
  let crc = CRC32.checksum(newer.withUnsafeBytes { Data($0) })
  withUnsafeBytes(of: crc.littleEndian) { newer.append(contentsOf: $0) }
  seeds.append(("minor1-extra.manifest", Data(newer)))

  // The seeds must decode, or they would only cover the refusal paths.
  for (_, bytes) in seeds { _ = try ManifestCodec.decode(bytes) }
  return seeds
}
