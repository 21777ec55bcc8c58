import Foundation
import MediaCacheStreaming
import Testing

/// `MP4StartRanges` against ffprobe: the byte ranges planned for the first N seconds of an MP4 hold every
/// packet ffprobe lists with a decoding time before N, no byte of a later packet, and little else (the head
/// boxes, `moov`).
@Suite struct MP4StartRangesTests {
  struct Packet {
    var stream: Int
    var dts: Double
    var bytes: Range<Int64>
  }

  /// ffprobe's packets of `path`: stream, decoding time in seconds (presentation time line, so negative
  /// before the first edit's start), and where the packet's bytes lie.
  func packets(_ path: String) async throws -> [Packet] {
    let text = try await runMediaTool(
      "ffprobe",
      ["-v", "error", "-show_entries", "packet=stream_index,dts_time,pos,size", "-of", "json", path])
    struct Output: Decodable {
      struct Entry: Decodable {
        var stream_index: Int
        var dts_time: String
        var pos: String
        var size: String
      }
      var packets: [Entry]
    }
    let output = try JSONDecoder().decode(Output.self, from: Data(text.utf8))
    return try output.packets.map {
      let position = try #require(Int64($0.pos))
      let size = try #require(Int64($0.size))
      return Packet(
        stream: $0.stream_index, dts: try #require(Double($0.dts_time)), bytes: position..<position + size)
    }
  }

  /// The plan for `seconds` of `bytes`, read through the async API; also the ranges it read.
  func plan(_ bytes: [UInt8], seconds: Double, url: String = "file.mp4") async throws
    -> (MP4StartRanges.Plan, [Range<Int64>])
  {
    let reads = ReadLog()
    let plan = try await MP4StartRanges.plan(seconds: seconds, url: url, fileLength: Int64(bytes.count)) {
      range in
      reads.ranges.append(range)
      return Array(bytes[Int(range.lowerBound)..<Int(min(range.upperBound, Int64(bytes.count)))])
    }
    return (plan, reads.ranges)
  }

  final class ReadLog: @unchecked Sendable {
    var ranges: [Range<Int64>] = []
  }

  func contains(_ ranges: [Range<Int64>], _ range: Range<Int64>) -> Bool {
    ranges.contains { $0.lowerBound <= range.lowerBound && range.upperBound <= $0.upperBound }
  }

  func overlaps(_ ranges: [Range<Int64>], _ range: Range<Int64>) -> Bool {
    ranges.contains { $0.overlaps(range) }
  }

  /// A QuickTime file made by ffmpeg: 30 fps with B-frames and a 15-frame GOP, 48 kHz AAC, moov at the tail
  /// (other tables than the fixtures').
  func generatedMOV(in directory: String) async throws -> String {
    let path = "\(directory)/generated.mov"
    _ = try await runMediaTool(
      "ffmpeg",
      [
        "-v", "error", "-f", "lavfi", "-i", "testsrc2=duration=6:size=160x90:rate=30", "-f", "lavfi", "-i",
        "sine=duration=6:sample_rate=48000", "-c:v", "libx264", "-g", "15", "-bf", "2", "-c:a", "aac",
        "-f", "mov", path,
      ])
    return path
  }

  /// The files checked against ffprobe: the media fixtures, a QuickTime file made at test time, and the tiny
  /// files of `Fixtures/media/mp4/` (tools/make-mp4-fixtures.sh), whose tables take the other forms
  /// (`co64`, `stz2`, a 64-bit box size, one track).
  static let files = [
    "tail-index.mp4", "faststart.mp4", "generated.mov", "mp4/faststart.mp4", "mp4/tail.mp4",
    "mp4/quicktime.mov",
    "mp4/audio-only.mp4", "mp4/co64.mp4", "mp4/stz2.mp4", "mp4/largesize.mp4",
  ]

  @Test(arguments: files)
  func theRangesHoldExactlyThePacketsDecodedBeforeTheTime(file: String) async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("mp4-\(UUID())").path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let path =
      await file == "generated.mov" ? try generatedMOV(in: directory) : "\(mediaFixturesDirectory)/\(file)"
    let bytes = [UInt8](try #require(FileManager.default.contents(atPath: path)))
    let all = try await packets(path)
    let streams = Set(all.map(\.stream)).count
    #expect(all.count >= 5 && streams == (file.hasSuffix("audio-only.mp4") ? 1 : 2))
    let lastDTS = try #require(all.map(\.dts).max())
    // Times between the packets' (the fixtures run at 25 and 30 fps, the tiny files at 10).
    let times = file.hasPrefix("mp4/") ? [0, 0.15, 0.25, lastDTS + 1] : [0, 0.5, 1.5, 3.7, lastDTS + 1]
    for seconds in times {
      let (plan, reads) = try await plan(bytes, seconds: seconds)
      let needed = all.filter { $0.dts < seconds - 1e-6 }
      let later = all.filter { $0.dts > seconds + 1e-6 }
      #expect(!needed.isEmpty)
      for packet in needed {
        #expect(contains(plan.ranges, packet.bytes), "\(file) \(seconds) s: packet \(packet) missing")
      }
      for packet in later {
        #expect(!overlaps(plan.ranges, packet.bytes), "\(file) \(seconds) s: packet \(packet) not needed")
      }
      #expect(contains(plan.ranges, plan.movieBox) && contains(plan.ranges, 0..<8))
      // Beyond the packets and moov: only the head boxes (ftyp, free, mdat's header).
      let packetBytes = needed.reduce(Int64(0)) { $0 + Int64($1.bytes.count) }
      let extra = plan.byteCount - packetBytes - Int64(plan.movieBox.count)
      #expect(extra >= 8 && extra <= 4096, "\(file) \(seconds) s: \(extra) bytes beyond the packets and moov")
      // Read: box headers of at most 32 bytes, then moov once; never mdat's payload.
      #expect(reads.last == plan.movieBox && reads.dropLast().allSatisfy { $0.count <= 32 }, "\(reads)")
      let duration = try #require(plan.duration)
      #expect(abs(duration - lastDTS) < 0.3, "\(file): duration \(duration), last packet at \(lastDTS)")
      // moov at the head of the faststart files, at the tail of the others.
      #expect((plan.movieBox.upperBound == Int64(bytes.count)) == !file.hasSuffix("faststart.mp4"))
    }
  }

  func error(_ bytes: [UInt8], seconds: Double = 2) async -> MP4Error? {
    do {
      _ = try await plan(bytes, seconds: seconds, url: "u")
      return nil
    } catch let error as MP4Error {
      return error
    } catch {
      Issue.record("not an MP4Error: \(error)")
      return nil
    }
  }

  @Test func damagedAndOtherFilesAreTypedErrors() async throws {
    let tail = try mediaFixture("tail-index.mp4")
    let fast = try mediaFixture("faststart.mp4")
    // Cut before its moov: mdat's size reaches past the end.
    let cut = try #require(await error(Array(tail.prefix(100_000))))
    #expect(cut.code == .invalidBox && cut.description.hasPrefix("u: MP4 box 'mdat' at offset "))
    #expect(cut.description.contains("reaches past its container's end at offset 100000"), "\(cut)")
    // moov whole, mdat cut: the chunk offsets point past the end.
    let short = try #require(await error(Array(fast.prefix(20_000)), seconds: 3))
    #expect(short.code == .invalidTable && short.description.contains("'stco': chunk"), "\(short)")
    #expect(short.description.contains("reaches past the file's end at 20000"), "\(short)")
    // Not an MP4 at all: the first "size" is text.
    let text = try #require(await error(Array("#EXTM3U\n#EXT-X-VERSION:3\n".utf8)))
    #expect(text.code == .invalidBox, "\(text)")
    // No moov among the top-level boxes.
    let boxes: [UInt8] =
      [0, 0, 0, 16] + Array("ftypisom".utf8) + [0, 0, 0, 0] + [0, 0, 0, 8] + Array("free".utf8)
    #expect(await error(boxes)?.description == "u: no 'moov' box among the file's top-level boxes")
    // A moov over the limit is not read.
    var scan = MP4StartRanges.BoxScan(url: "u", fileLength: 1 << 40, seconds: 2)
    let huge: [UInt8] = [0, 0, 0, 1] + Array("moov".utf8) + [0, 0, 0, 0, 0x40, 0, 0, 0]
    do {
      _ = try scan.feed(huge)
      Issue.record("a moov of 1 GiB was accepted")
    } catch {
      #expect(error.code == .tooLarge)
      #expect(
        error.description
          == "u: MP4 box 'moov' of 1073741824 bytes is larger than the limit of 67108864 bytes")
    }
    // A track whose first chunk lies past the end, a few bytes after moov (found by the mp4 fuzzer, now one of
    // its seeds): what is planned stays inside the file.
    let found = try [UInt8](
      Data(
        contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
          .deletingLastPathComponent().appendingPathComponent(
            "tools/fuzz/seeds/mp4/chunk-offset-past-the-end")))
    var planned = 0
    for seconds in [0, 0.15, 1e6] {
      guard let (inside, _) = try? await plan(found, seconds: seconds) else { continue }
      planned += 1
      #expect(
        inside.ranges.allSatisfy { $0.upperBound <= Int64(found.count) }, "\(seconds) s: \(inside.ranges)")
    }
    #expect(planned > 0)
    // A damaged table: the first stsc entry moved to chunk 2.
    var damaged = fast
    let stsc = try #require(damaged.firstRange(of: Array("stsc".utf8)))
    damaged[stsc.upperBound + 8 + 3] = 2
    let table = try #require(await error(damaged))
    #expect(table.code == .invalidTable && table.description.contains("'stsc': its first entry"), "\(table)")
  }

  /// A fragmented file is planned by its fragments: moov, then every moof and mdat whose first decoding time
  /// is before the time. Checked against ffprobe on a 4 s file fragmented at each key frame (1 s) and on the
  /// tiny fixture; a fragment that does not say its time (no tfdt) is an error for the fallback.
  @Test func fragmentedFilesArePlannedByTheirFragments() async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("mp4-\(UUID())").path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let generated = "\(directory)/fragmented.mp4"
    _ = try await runMediaTool(
      "ffmpeg",
      [
        "-v", "error", "-i", "\(mediaFixturesDirectory)/faststart.mp4", "-c", "copy", "-movflags",
        "frag_keyframe+empty_moov", generated,
      ])
    for path in [generated, "\(mediaFixturesDirectory)/mp4/fragmented.mp4"] {
      let bytes = [UInt8](try #require(FileManager.default.contents(atPath: path)))
      let all = try await packets(path)
      let lastDTS = try #require(all.map(\.dts).max())
      var previous: Int64 = 0
      for seconds in [0.15, 0.5, 1.5, lastDTS + 1] {
        let (plan, reads) = try await plan(bytes, seconds: seconds)
        let needed = all.filter { $0.dts < seconds - 1e-6 }
        for packet in needed {
          #expect(contains(plan.ranges, packet.bytes), "\(path) \(seconds) s: packet \(packet) missing")
        }
        // Whole fragments: at most one fragment (a GOP: 1 s of the 4 s file, 0.2 s of the tiny one) more than
        // the packets, and never a packet decoded a fragment after the time.
        let gop = path == generated ? 1.0 : 0.2
        for packet in all where packet.dts > seconds + gop + 0.1 {
          #expect(!overlaps(plan.ranges, packet.bytes), "\(path) \(seconds) s: packet \(packet) not needed")
        }
        #expect(plan.byteCount >= previous)
        previous = plan.byteCount
        // moov, then a moof at a time: box headers of at most 32 bytes and the boxes read whole.
        #expect(reads.contains(plan.movieBox) && contains(plan.ranges, plan.movieBox))
      }
      #expect(previous == Int64(bytes.count) || path == generated, "all of the tiny file for all its time")
    }
    // A fragment that does not say when it starts.
    var untimed = try mediaFixture("mp4/fragmented.mp4")
    while let tfdt = untimed.firstRange(of: Array("tfdt".utf8)) {
      untimed[tfdt.lowerBound] = UInt8(ascii: "x")
    }
    let fragmented = try #require(await error(untimed))
    #expect(fragmented.code == .fragmented && fragmented.description.hasPrefix("u: fragmented MP4"))
    // The fallback: the file's bytes per second of its duration, from the start.
    #expect(
      MP4StartRanges.estimatedRange(seconds: 1, fileLength: 157_719, duration: 4, bitsPerSecond: 0)
        == 0..<39_430)
    #expect(
      MP4StartRanges.estimatedRange(seconds: 2, fileLength: 1 << 30, duration: nil, bitsPerSecond: 8_000_000)
        == 0..<2_000_000)
    #expect(
      MP4StartRanges.estimatedRange(seconds: 10, fileLength: 1000, duration: 4, bitsPerSecond: 0) == 0..<1000)
  }
}
