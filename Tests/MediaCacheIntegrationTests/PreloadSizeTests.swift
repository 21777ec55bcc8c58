import Foundation
import MediaCache
import MediaCacheStreaming
import MediaCacheTestSupport
import Testing

/// What `mediacache preload --seconds 2` plans is about what a player reads to play 2 seconds through the
/// proxy: within 10% of it plus one chunk (16 KiB here). The player is ffprobe reading 2 s of packets
/// (`-read_intervals %+2`) through a proxy with an empty cache.
///
/// - MP4: what its demuxer reads, by its own account: the `ftyp` and `moov` boxes (`-v trace` names them with
///   their offsets) and the bytes of every packet it returned. (Its I/O layer also reads ahead up to 32 KiB past
///   the last packet: ffprobe's byte count is 85 590 for tail-index.mp4 and 106 133 for faststart.mp4, against
///   79 300 planned; those extra bytes are not needed to play, and the decisive test,
///   `PreloadPlaybackTests`, shows the planned bytes play.)
/// - HLS: the bytes its I/O contexts read (playlists and the segments it opened), which it reads whole.
@Suite(.serialized) struct PreloadSizeTests {
  static let chunkSize: Int64 = 16384
  let seconds = 2

  /// The bytes `mediacache preload` plans (MP4: "= N bytes") or fetches into an empty cache (HLS).
  func preloaded(_ url: String, in directory: String) async throws -> Int64 {
    let result = try await run(
      binary("mediacache"),
      [
        "preload", "--cache", "\(directory)/preload", "--chunk-size", "\(Self.chunkSize)", "--seconds",
        "\(seconds)",
        url,
      ])
    #expect(result.status == 0, "\(result.stderr)")
    let pattern = url.hasSuffix(".mp4") ? #/= (\d+) bytes/# : #/fetched (\d+) bytes/#
    let match = try #require(result.text.firstMatch(of: pattern), "\(result.text)")
    return try #require(Int64(match.1))
  }

  /// Runs ffprobe on the origin's `file` through a proxy with an empty cache in `directory`, reading `seconds`
  /// of packets with `level` logging; returns its stdout and stderr, and the bytes `mediacache preload` plans
  /// for the same seconds.
  func probeAndPlan(_ file: String, _ directory: String, level: String, entries: String) async throws -> (
    CommandResult, planned: Int64
  ) {
    try await withFileOrigin { origin in
      let (proxy, port) = try await startProxy(cache: "\(directory)/proxied", [])
      defer { proxy.kill() }
      let proxied = "http://127.0.0.1:\(port)\(try #require(ProxyPathForm.path(for: origin.url(file: file))))"
      let arguments = [
        "-v", level, "-read_intervals", "%+\(seconds)", "-show_entries", entries, "-of", "json",
      ]
      let result = try await run(try mediaTool("ffprobe"), arguments + [proxied])
      #expect(result.status == 0, "\(result.stderr.suffix(2000))")
      return await (result, try preloaded(origin.url(file: file), in: directory))
    }
  }

  func expectClose(_ planned: Int64, _ read: Int64, _ what: String) {
    let allowed = read / 10 + Self.chunkSize
    #expect(read > 0 && abs(planned - read) <= allowed, "\(what): planned \(planned), player read \(read)")
  }

  @Test(arguments: ["tail-index.mp4", "faststart.mp4"])
  func anMP4sPlanIsWhatItsDemuxerReads(file: String) async throws {
    try await withTemporaryDirectory { directory in
      let (result, planned) = try await probeAndPlan(
        file, directory, level: "trace", entries: "packet=pos,size")
      struct Packets: Decodable {
        struct Packet: Decodable { var pos: String; var size: String }
        var packets: [Packet]
      }
      var read = ByteRangeSet()
      for packet in try JSONDecoder().decode(Packets.self, from: Data(result.text.utf8)).packets {
        let start = try #require(Int64(packet.pos))
        read.insert(start..<start + (try #require(Int64(packet.size))))
      }
      // "type:'moov' parent:'root' sz: 4397 153330 157719": size, offset after the 8-byte header, file size.
      for box in ["ftyp", "moov"] {
        let line = try #require(
          result.stderr.split(separator: "\n").first { $0.contains("type:'\(box)' parent:'root'") }, "\(box)")
        let numbers = line.split(separator: "sz: ").last!.split(separator: " ").compactMap { Int64($0) }
        read.insert(numbers[1] - 8..<numbers[1] - 8 + numbers[0])
      }
      expectClose(planned, read.count, file)
    }
  }

  @Test(arguments: ["hls/v0/index.m3u8", "hls/v1/index.m3u8", "hls/v2/index.m3u8"])
  func anHLSPlanIsWhatThePlayerReads(file: String) async throws {
    try await withTemporaryDirectory { directory in
      let (result, planned) = try await probeAndPlan(
        file, directory, level: "debug", entries: "packet=pts_time")
      // "[AVIOContext @ 0x…] Statistics: 80035 bytes read, 0 seeks", one per playlist and segment opened.
      let read = result.stderr.split(separator: "\n").filter { $0.contains("] Statistics: ") }.map { line in
        Int64(line.split(separator: "Statistics: ").last!.split(separator: " ").first!) ?? 0
      }
      #expect(read.count >= 2, "\(result.stderr.suffix(2000))")
      expectClose(planned, read.reduce(0, +), file)
    }
  }
}
