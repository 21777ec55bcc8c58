import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// The decoder against hostile bytes: it must refuse with a `ManifestError` or return a manifest that survives
/// its own round trip. It must never trap (a trap ends the whole test process, so every case here would fail).
@Suite struct ManifestFuzzTests {
  /// Valid manifests with several runs and every field set, of known and unknown length.
  static func seeds() throws -> [Manifest] {
    var unknownLength = Manifest(
      objectID: ObjectID(CacheKey("https://example.com/live.ts")), chunkSize: 1 << 20,
      createdAt: Date(timeIntervalSince1970: 1_650_000_000.25), contentType: "video/mp2t", etag: "W/\"7\"",
      isPinned: false, userMetadata: randomBytes(count: 200, seed: 3))
    for index in [0, 1, 2, 3, 70, 71, 1_000, 40_000] {
      unknownLength.setChunk(index, crc: UInt32(index * 31 + 5))
    }
    unknownLength.versionTag = 0xFFFF_FFFF
    let minimal = Manifest(
      objectID: ObjectID(CacheKey("m")), chunkSize: 4096, contentLength: 0,
      createdAt: Date(timeIntervalSince1970: 1_000))
    return [richManifest(), unknownLength, minimal]
  }

  /// A short name for the kind of error, for counting.
  static func kind(_ error: ManifestError) -> String {
    switch error.kind {
    case .truncated: "truncated"
    case .badMagic: "badMagic"
    case .unsupportedVersion: "unsupportedVersion"
    case .checksumMismatch: "checksumMismatch"
    case .invalidField: "invalidField"
    case .objectIDMismatch: "objectIDMismatch"
    case .trailingBytes: "trailingBytes"
    }
  }

  @Test func everyTruncationIsRefused() throws {
    for manifest in try Self.seeds() {
      let bytes = Array(try ManifestCodec.encode(manifest))
      for length in 0..<bytes.count {
        // The plain prefix: too short, or its last four bytes are not its CRC.
        do {
          _ = try ManifestCodec.decode(Data(bytes[..<length]))
          Issue.record("prefix of \(length) of \(bytes.count) bytes decoded")
        } catch {
          switch error.code {
          case .truncated, .checksumMismatch: break
          default: Issue.record("prefix of \(length) bytes: unexpected \(error)")
          }
        }
        // A strict prefix of the body with a correct CRC appended, so the field parser itself meets the end.
        guard length < bytes.count - 4 else { continue }
        let body = Array(bytes[..<length])
        do {
          _ = try ManifestCodec.decode(withRecomputedCRC(body))
          Issue.record("body prefix of \(body.count) bytes with a valid CRC decoded")
        } catch {
          if body.count >= 6, error.code == .truncated { continue }
          if body.count < 6 { continue }  // magic or version overlap the CRC: any ManifestError will do
          Issue.record("body prefix of \(body.count) bytes: expected truncated, got \(error)")
        }
      }
    }
  }

  /// Applies one random mutation to `bytes`. Half of the positions fall in the header and first runs,
  /// where the counts and sizes live.
  static func mutate(_ bytes: inout [UInt8], using rng: inout SeededRandom) {
    func position(_ extra: Int = 0) -> Int {
      let upper = bytes.count + extra
      if Bool.random(using: &rng) { return Int.random(in: 0..<min(upper, 96), using: &rng) }
      return Int.random(in: 0..<upper, using: &rng)
    }
    guard !bytes.isEmpty else { return }
    switch Int.random(in: 0..<6, using: &rng) {
    case 0:
      bytes[position()] ^= 1 << UInt8.random(in: 0...7, using: &rng)
    case 1:
      bytes[position()] = UInt8.random(in: 0...255, using: &rng)
    case 2:
      let insert = (0..<Int.random(in: 1...8, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng)
      }
      bytes.insert(contentsOf: insert, at: position(1))
    case 3:
      let start = position()
      bytes.removeSubrange(start..<min(bytes.count, start + Int.random(in: 1...8, using: &rng)))
    case 4:
      // An interesting 32-bit value into a header or run field.
      let fields = [
        HeaderOffset.chunkSize, HeaderOffset.versionTag, HeaderOffset.runCount, HeaderOffset.presentCount,
        HeaderOffset.firstRun, HeaderOffset.firstRun + 4, HeaderOffset.firstRun + 8,
        HeaderOffset.createdAt + 4,
        HeaderOffset.contentLength, HeaderOffset.contentLength + 4,
      ]
      let values: [UInt32] = [
        0, 1, 2, 3, 0x7F, 0xFF, 0xFFFF, 0x7FFF_FFFF, 0xFFFF_FFFF, 4096, 1 << 20, 1 << 26,
      ]
      let offset = fields.randomElement(using: &rng)!
      guard offset + 4 <= bytes.count else { return }
      poke(values.randomElement(using: &rng)!, at: offset, in: &bytes)
    default:
      let flags: [UInt16] = [0, 1, 2, 3, 4, 0x8000]
      guard HeaderOffset.flags + 2 <= bytes.count else { return }
      poke(flags.randomElement(using: &rng)!, at: HeaderOffset.flags, in: &bytes)
    }
  }

  @Test func randomMutationsAreRefusedOrRoundTrip() throws {
    let encoded = try Self.seeds().map { Array(try ManifestCodec.encode($0)) }
    var rng = SeededRandom(seed: 0x4D43_4D46)
    var outcomes: [String: Int] = [:]
    var failures: [String] = []
    let iterations = 8000
    for iteration in 0..<iterations {
      var bytes = encoded.randomElement(using: &rng)!
      // Half keep the stored CRC (the checksum must catch them), half get a fresh CRC so the mutation reaches
      // the field checks.
      let recompute = iteration % 2 == 0
      if recompute { bytes.removeLast(4) }
      for _ in 0..<Int.random(in: 1...3, using: &rng) { Self.mutate(&bytes, using: &rng) }
      let input = recompute ? withRecomputedCRC(bytes) : Data(bytes)

      let manifest: Manifest
      do {
        manifest = try ManifestCodec.decode(input)
      } catch {
        outcomes[Self.kind(error), default: 0] += 1
        continue
      }
      outcomes["decoded", default: 0] += 1
      do {
        let again = try ManifestCodec.encode(manifest)
        let back = try ManifestCodec.decode(again)
        if back != manifest {
          failures.append("iteration \(iteration): came back with \(manifestDifferences(manifest, back))")
        }
      } catch {
        failures.append("iteration \(iteration): a decoded manifest does not re-encode: \(error)")
      }
    }
    #expect(
      failures.isEmpty,
      "\(failures.count) of \(iterations) mutations decoded but did not round-trip; first: \(failures.prefix(3))"
    )
    // The mutations reach every layer of the decoder, and some survive it.
    for kind in [
      "decoded", "truncated", "badMagic", "unsupportedVersion", "checksumMismatch", "invalidField",
      "trailingBytes",
    ] {
      #expect(outcomes[kind, default: 0] > 0, "no mutation ended as \(kind): \(outcomes)")
    }
    #expect(outcomes.values.reduce(0, +) == iterations)
  }

  @Test func mutationsWithTheStoredCRCAreCaught() throws {
    // Any single changed bit in the body or the CRC is caught (CRC-32 detects every single-bit error).
    let bytes = Array(try ManifestCodec.encode(richManifest()))
    for bit in 0..<(bytes.count * 8) where bit / 8 >= 6 {
      var mutated = bytes
      mutated[bit / 8] ^= 1 << UInt8(bit % 8)
      guard decodeFailure(Data(mutated))?.code == .checksumMismatch else {
        Issue.record("flipping bit \(bit) was not caught by the CRC")
        continue
      }
    }
  }
}

/// The error decoding `bytes` throws, nil if it decodes.
func decodeFailure(_ bytes: Data) -> ManifestError? {
  do {
    _ = try ManifestCodec.decode(bytes)
    return nil
  } catch {
    return error
  }
}
