import Foundation
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

// The test origin's `files` mode, and the real ffmpeg/ffprobe reading the committed media fixtures
// (`Fixtures/media`, made by tools/make-media-fixtures.sh) from it over HTTP.

/// `Fixtures/media` in the source tree.
let mediaFixturesDirectory = URL(fileURLWithPath: #filePath)
  .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
  .appendingPathComponent("Fixtures/media").path

/// The bytes of fixture `relativePath` (under `Fixtures/media`).
func mediaFixture(_ relativePath: String) throws -> [UInt8] {
  let path = "\(mediaFixturesDirectory)/\(relativePath)"
  return [UInt8](try #require(FileManager.default.contents(atPath: path), "cannot read \(path)"))
}

/// Runs `body` with an origin serving `root` in the `files` mode, shut down afterwards.
func withFileOrigin<T>(root: String = mediaFixturesDirectory, _ body: (TestOrigin) async throws -> T)
  async throws -> T
{
  try await withOrigin(fileRoot: root, body)
}

// MARK: - ffmpeg

/// The path of `ffmpeg` or `ffprobe` on PATH. Missing tools fail the test (never a silent skip).
func mediaTool(_ name: String) throws -> String {
  let directories = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
  let found = directories.map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
  guard let found else {
    throw MediaToolError(
      description:
        "\(name) is not on PATH: install ffmpeg (apt-get install ffmpeg; .ci/run does it) to run the media tests"
    )
  }
  return found
}

/// A media tool is missing or failed. Thrown, not recorded with `#require`, so that it also fails the test
/// when the tool is waited for on a thread of its own (outside the test's task, where an issue would lose its test).
struct MediaToolError: Error, CustomStringConvertible {
  let description: String
}

/// The options every ffmpeg/ffprobe run here uses for `input`, in one place. A local HLS playlist needs
/// `-allowed_extensions ALL`, or the hls demuxer refuses to open the AES key file `key.bin` ("not a common
/// multimedia extension"); ffmpeg applies that check to local files only, so over HTTP nothing is needed.
func mediaInputOptions(for input: String) -> [String] {
  let isLocal = !input.hasPrefix("http://") && !input.hasPrefix("https://")
  return isLocal && input.hasSuffix(".m3u8") ? ["-allowed_extensions", "ALL"] : []
}

/// ffmpeg's output of a run, failing the test with its stderr when it exits non-zero.
func runMediaTool(_ name: String, _ arguments: [String]) async throws -> String {
  let result = try await run(try mediaTool(name), arguments)
  guard result.status == 0 else {
    throw MediaToolError(
      description: "\(name) \(arguments.joined(separator: " ")) exited \(result.status): \(result.stderr)")
  }
  return result.text
}

/// `ffprobe`'s container duration of `input` (a local path or a URL), as printed.
func probedDuration(_ input: String) async throws -> String {
  try await runMediaTool(
    "ffprobe",
    ["-v", "error"] + mediaInputOptions(for: input) + [
      "-show_entries", "format=duration", "-of", "csv=p=0", input,
    ]
  ).trimmingCharacters(in: .whitespacesAndNewlines)
}

/// `ffmpeg -f framemd5` of every decoded frame of `input` (from `seek` seconds on when given, for `duration`
/// seconds when given).
func frameHashes(_ input: String, seek: Double? = nil, duration: Double? = nil) async throws -> String {
  var arguments = ["-nostdin", "-v", "error"]
  if let seek { arguments += ["-ss", String(seek)] }
  arguments += mediaInputOptions(for: input) + ["-i", input]
  if let duration { arguments += ["-t", String(duration)] }
  arguments += ["-f", "framemd5", "-"]
  return try await runMediaTool("ffmpeg", arguments)
}

/// The offsets of the top-level atoms (boxes) of an MP4 file, by type (the first of each type).
func topLevelAtoms(_ bytes: [UInt8]) -> [String: Int] {
  var atoms: [String: Int] = [:]
  var offset = 0
  while offset + 8 <= bytes.count {
    var length = bytes[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
    let type = String(decoding: bytes[offset + 4..<offset + 8], as: UTF8.self)
    if length == 1, offset + 16 <= bytes.count {
      length = bytes[offset + 8..<offset + 16].reduce(0) { $0 << 8 | Int($1) }
    } else if length == 0 {
      length = bytes.count - offset
    }
    if atoms[type] == nil { atoms[type] = offset }
    guard length >= 8 else { break }
    offset += length
  }
  return atoms
}

// MARK: - Tests

@Suite struct MediaFixtureTests {
  static let fixtureFiles = [
    "tail-index.mp4", "faststart.mp4", "hls/master.m3u8", "hls/v0/index.m3u8", "hls/v0/seg000.ts",
    "hls/v1/index.m3u8", "hls/v1/key.bin", "hls/v1/seg003.ts", "hls/v2/index.m3u8", "hls/v2/init.mp4",
    "hls/v2/seg001.m4s",
  ]

  // MARK: files mode

  @Test func fixturesAreWhatTheirNamesSay() throws {
    let tail = topLevelAtoms(try mediaFixture("tail-index.mp4"))
    let fast = topLevelAtoms(try mediaFixture("faststart.mp4"))
    let tailMoov = try #require(tail["moov"])
    let tailMdat = try #require(tail["mdat"])
    let fastMoov = try #require(fast["moov"])
    let fastMdat = try #require(fast["mdat"])
    #expect(tailMoov > tailMdat, "tail-index.mp4: moov at \(tailMoov), mdat at \(tailMdat)")
    #expect(fastMoov < fastMdat, "faststart.mp4: moov at \(fastMoov), mdat at \(fastMdat)")

    let master = String(decoding: try mediaFixture("hls/master.m3u8"), as: UTF8.self)
    let bandwidths = master.split(separator: "\n").compactMap { line in
      line.firstMatch(of: /^#EXT-X-STREAM-INF:(?:.*,)?BANDWIDTH=(\d+)/).map { String($0.1) }
    }
    #expect(bandwidths.count == 3, "\(master)")
    #expect(Set(bandwidths).count >= 2, "\(master)")
    let uris = master.split(separator: "\n").filter { !$0.hasPrefix("#") }
    #expect(uris == ["v0/index.m3u8", "v1/index.m3u8", "v2/index.m3u8"])
    let encrypted = String(decoding: try mediaFixture("hls/v1/index.m3u8"), as: UTF8.self)
    #expect(encrypted.contains("#EXT-X-KEY:METHOD=AES-128,URI=\"key.bin\""))
    let fragmented = String(decoding: try mediaFixture("hls/v2/index.m3u8"), as: UTF8.self)
    #expect(fragmented.contains("#EXT-X-MAP:URI=\"init.mp4\""))
    for playlist in ["hls/v0/index.m3u8", "hls/v1/index.m3u8", "hls/v2/index.m3u8"] {
      let text = String(decoding: try mediaFixture(playlist), as: UTF8.self)
      #expect(text.contains("#EXT-X-ENDLIST") && text.contains("#EXT-X-PLAYLIST-TYPE:VOD"), "\(playlist)")
      #expect(!text.contains("://") && !text.contains("URI=\"/"), "\(playlist) has an absolute URI")
    }
  }

  @Test func filesModeServesWholeFilesWithValidatorsAndContentTypes() async throws {
    try await withFileOrigin { origin in
      #expect(origin.url(file: "hls/v0/seg000.ts") == "\(origin.baseURL)/files/hls/v0/seg000.ts")
      #expect(TestOrigin.path(file: "a b/c%.mp4") == "/files/a%20b/c%25.mp4")
      let types = [
        "mp4": "video/mp4", "m3u8": "application/vnd.apple.mpegurl", "ts": "video/mp2t",
        "m4s": "video/iso.segment", "bin": "application/octet-stream",
      ]
      for file in Self.fixtureFiles {
        let expected = try mediaFixture(file)
        let response = try rawRequest(origin, TestOrigin.path(file: file))
        #expect(response.status == 200, "\(file)")
        #expect(response.isComplete && response.body == expected, "\(file)")
        #expect(response.header("Content-Length") == "\(expected.count)", "\(file)")
        #expect(response.header("Content-Type") == types[String(file.split(separator: ".").last!)], "\(file)")
        #expect(response.header("Accept-Ranges") == "bytes", "\(file)")
        #expect(response.header("ETag")?.hasPrefix("\"") == true, "\(file)")
        #expect(response.header("Last-Modified")?.hasSuffix(" GMT") == true, "\(file)")
        #expect(response.header("Content-Range") == nil)
      }

      // HEAD: the GET headers, no body; the query is ignored.
      let get = try rawRequest(origin, TestOrigin.path(file: "tail-index.mp4"))
      let head = try rawRequest(
        origin, TestOrigin.path(file: "tail-index.mp4") + "?size=5&x=1", method: "HEAD",
        headers: [("Range", "bytes=0-9")])
      #expect(head.status == 200 && head.bodyCount == 0)
      for name in ["Content-Length", "Content-Type", "ETag", "Last-Modified", "Accept-Ranges"] {
        #expect(head.header(name) == get.header(name), "\(name)")
      }

      // Recorded under the relative path.
      let records = try await origin.waitForCompletedRequests(for: "tail-index.mp4", count: 3)
      #expect(records.map(\.method) == ["GET", "GET", "HEAD"])
      #expect(records.allSatisfy { $0.mode == "files" })
      #expect(records[2].path == "/files/tail-index.mp4?size=5&x=1")
      #expect(origin.totalBodyBytes(for: "tail-index.mp4") == 2 * get.bodyCount)
      #expect(origin.requests(for: "hls/v0/seg000.ts").count == 1)
    }
  }

  @Test func filesModeRangesLikeNormalMode() async throws {
    try await withFileOrigin { origin in
      let file = try mediaFixture("tail-index.mp4")
      let size = file.count
      let path = TestOrigin.path(file: "tail-index.mp4")
      let cases: [(String, Range<Int>)] = [
        ("bytes=0-0", 0..<1), ("bytes=10-99", 10..<100), ("bytes=100000-", 100_000..<size),
        ("bytes=-500", size - 500..<size), ("bytes=\(size - 10)-\(size + 5000)", size - 10..<size),
        ("bytes=-\(size * 2)", 0..<size), ("bytes=65530-140000", 65_530..<140_001),
      ]
      for (header, expected) in cases {
        let response = try rawRequest(origin, path, headers: [("Range", header)])
        #expect(response.status == 206, "\(header)")
        #expect(
          response.header("Content-Range")
            == "bytes \(expected.lowerBound)-\(expected.upperBound - 1)/\(size)",
          "\(header)")
        #expect(response.header("Content-Length") == "\(expected.count)", "\(header)")
        #expect(response.body == Array(file[expected]), "\(header)")
      }
      for header in ["bytes=\(size)-", "bytes=\(size + 10)-\(size + 20)", "bytes=-0"] {
        let response = try rawRequest(origin, path, headers: [("Range", header)])
        #expect(response.status == 416, "\(header)")
        #expect(response.header("Content-Range") == "bytes */\(size)", "\(header)")
        #expect(response.bodyCount == 0, "\(header)")
      }
      for header in ["bytes=0-1,5-6", "bytes=5-1", "items=0-1"] {
        let response = try rawRequest(origin, path, headers: [("Range", header)])
        #expect(response.status == 200 && response.body == file, "\(header)")
      }
      let records = try await origin.waitForCompletedRequests(for: "tail-index.mp4", count: 13)
      #expect(records.first?.range == "bytes=0-0")
    }
  }

  @Test func filesModeConditionalRequests() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let original = try mediaFixture("faststart.mp4")
    try Data(original).write(to: URL(fileURLWithPath: dir.file("clip.mp4")))
    try await withFileOrigin(root: dir.path) { origin in
      let path = TestOrigin.path(file: "clip.mp4")
      func get(_ headers: [(String, String)]) throws -> RawHTTPResponse {
        try rawRequest(origin, path, headers: headers)
      }
      let first = try get([])
      let etag = try #require(first.header("ETag"))
      let lastModified = try #require(first.header("Last-Modified"))

      let byTag = try get([("Range", "bytes=100-199"), ("If-Range", etag)])
      #expect(byTag.status == 206 && byTag.body == Array(original[100..<200]))
      let byDate = try get([("Range", "bytes=100-199"), ("If-Range", lastModified)])
      #expect(byDate.status == 206)
      for stale in ["\"other\"", "W/\(etag)", "Mon, 01 Jan 2024 00:00:00 GMT"] {
        let response = try get([("Range", "bytes=100-199"), ("If-Range", stale)])
        #expect(response.status == 200, "\(stale)")
        #expect(response.header("Content-Range") == nil && response.body == original, "\(stale)")
      }
      #expect(try get([("If-None-Match", etag)]).status == 304)
      #expect(try get([("If-None-Match", "\"other\"")]).status == 200)
      #expect(try get([("If-Modified-Since", lastModified)]).status == 304)

      // Rewriting the file changes the ETag: the old one no longer matches.
      let changed = Array(original[..<1000])
      try Data(changed).write(to: URL(fileURLWithPath: dir.file("clip.mp4")))
      let after = try get([("Range", "bytes=100-199"), ("If-Range", etag)])
      #expect(after.status == 200 && after.body == changed)
      #expect(after.header("ETag") != etag)
      #expect(after.header("Content-Length") == "1000")
    }
  }

  @Test func filesModeRefusesPathsOutsideTheRoot() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let root = dir.file("root")
    let manager = FileManager.default
    try manager.createDirectory(atPath: "\(root)/sub", withIntermediateDirectories: true)
    try manager.createDirectory(atPath: dir.file("outside"), withIntermediateDirectories: true)
    try Data("secret\n".utf8).write(to: URL(fileURLWithPath: dir.file("secret.txt")))
    try Data("secret\n".utf8).write(to: URL(fileURLWithPath: dir.file("outside/secret.txt")))
    try Data("inside\n".utf8).write(to: URL(fileURLWithPath: "\(root)/sub/in side.bin"))
    try manager.createSymbolicLink(atPath: "\(root)/link-out", withDestinationPath: dir.file("secret.txt"))
    try manager.createSymbolicLink(atPath: "\(root)/dir-out", withDestinationPath: dir.file("outside"))
    try manager.createSymbolicLink(atPath: "\(root)/link-in", withDestinationPath: "sub/in side.bin")
    // A sibling whose name starts with the root's: a prefix check without "/" would let it through.
    try manager.createDirectory(atPath: "\(root)-sibling", withIntermediateDirectories: true)
    try Data("secret\n".utf8).write(to: URL(fileURLWithPath: "\(root)-sibling/secret.txt"))
    try manager.createSymbolicLink(atPath: "\(root)/sibling", withDestinationPath: "\(root)-sibling")

    try await withFileOrigin(root: root) { origin in
      let inside = try rawRequest(origin, TestOrigin.path(file: "sub/in side.bin"))
      #expect(inside.status == 200 && inside.body == Array("inside\n".utf8))
      #expect(try rawRequest(origin, "/files/sub/in%20side.bin?x=../../secret.txt").status == 200)
      #expect(try rawRequest(origin, "/files/link-in").status == 200)
      #expect(origin.requests(for: "sub/in side.bin").count == 2)

      let refused = [
        "/files/../secret.txt", "/files/sub/../../secret.txt", "/files/%2e%2e/secret.txt",
        "/files/%2E%2E%2Fsecret.txt", "/files/sub%2f..%2f..%2fsecret.txt", "/files/..%5csecret.txt",
        "/files/%252e%252e/secret.txt", "/files//etc/passwd", "/files/%2Fetc%2Fpasswd", "/files/link-out",
        "/files/dir-out/secret.txt", "/files/sibling/secret.txt", "/files/", "/files", "/files/sub",
        "/files/sub/", "/files/./sub/in%20side.bin", "/files/sub//in%20side.bin", "/files/missing.mp4",
        "/files/sub/in%00side.bin", "/files/%zz", "/files/%", "/files/%ff", "/files/root/../secret.txt",
      ]
      for path in refused {
        let response = try rawRequest(origin, path)
        #expect(response.status == 404, "\(path)")
        #expect(!response.body.elementsEqual("secret\n".utf8), "\(path)")
        let head = try rawRequest(origin, path, method: "HEAD")
        #expect(head.status == 404, "HEAD \(path)")
      }
    }

    // Without a file root nothing is served; a root that is not a directory is refused at start.
    try await withOrigin { origin in
      let response = try rawRequest(origin, TestOrigin.path(file: "tail-index.mp4"))
      #expect(response.status == 404)
    }
    await #expect(throws: TestOriginError.badFileRoot(dir.file("secret.txt"))) {
      _ = try await TestOrigin.start(fileRoot: dir.file("secret.txt"))
    }
    await #expect(throws: TestOriginError.badFileRoot(dir.file("nothing"))) {
      _ = try await TestOrigin.start(fileRoot: dir.file("nothing"))
    }
  }

  @Test func filesModeStreamsLargeFilesInPieces() async throws {
    // A sparse 256 MiB file: the origin (in this process) must follow the client, not read the file whole.
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let size = 256 << 20
    let markerCount = 4096
    let descriptor = open(dir.file("big.bin"), O_CREAT | O_WRONLY, 0o600)
    try #require(descriptor >= 0)
    let marker = [UInt8](repeating: 0x5A, count: markerCount)
    #expect(pwrite(descriptor, marker, markerCount, off_t(size - markerCount)) == markerCount)
    #expect(ftruncate(descriptor, off_t(size)) == 0)
    close(descriptor)

    try await withFileOrigin(root: dir.path) { origin in
      let before = residentBytes() ?? 0
      let connection = try RawHTTPConnection(port: origin.port)
      defer { connection.close() }
      try connection.sendRequest("GET", TestOrigin.path(file: "big.bin"))
      try await Task.sleep(for: .milliseconds(500))
      let stalled = origin.requests(for: "big.bin").first?.bodyBytesSent ?? 0
      #expect(stalled < 32 << 20, "origin wrote \(stalled) bytes to a client that reads nothing")
      var peak = residentBytes() ?? before
      var received = 0
      var mismatches = 0
      var expected = [UInt8](repeating: 0, count: 256 * 1024)
      let response = try connection.readResponse { bytes in
        // Zeros (the hole), then the marker bytes at the end.
        let count = bytes.count
        if expected.count < count { expected = [UInt8](repeating: 0, count: count) }
        expected.withUnsafeMutableBytes { raw in
          memset(raw.baseAddress!, 0, count)
          let markerFrom = max(0, size - markerCount - received)
          if markerFrom < count { memset(raw.baseAddress! + markerFrom, 0x5A, count - markerFrom) }
          if memcmp(raw.baseAddress!, bytes.baseAddress!, count) != 0 { mismatches += 1 }
        }
        let previous = received
        received += count
        if previous >> 24 != received >> 24 { peak = max(peak, residentBytes() ?? 0) }
      }
      #expect(response.status == 200 && response.isComplete)
      #expect(received == size && mismatches == 0)
      // The process's RSS: suites running beside this one grow it too (42, 68 and 79 MiB were seen with all of
      // them, against a bound of 64 MiB for a file of 128 MiB). Holding the file would grow it by 256 MiB.
      #expect(peak - before < 128 << 20, "RSS grew by \((peak - before) >> 20) MiB streaming 256 MiB")
      let record = try #require(try await origin.waitForCompletedRequests(for: "big.bin", count: 1).first)
      #expect(record.bodyBytesSent == size && !record.clientDisconnected)
    }
  }

  @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: binary("mediacache-test-origin"))))
  func standaloneOriginServesAFileRoot() async throws {
    let child = try ChildProcess(
      binary("mediacache-test-origin"), ["--port", "0", "--file-root", mediaFixturesDirectory])
    try await child.closingInputAfter {
      #expect(await child.waitForLine(timeout: 30) { $0.hasPrefix("listening on http://127.0.0.1:") })
      let line = try #require(child.outputSoFar.split(separator: "\n").first)
      let port = try #require(Int(line.split(separator: ":").last ?? ""))
      let response = try rawRequest(
        port: port, TestOrigin.path(file: "hls/master.m3u8"), headers: [("Range", "bytes=0-6")])
      #expect(response.status == 206 && response.body == Array("#EXTM3U".utf8))
    }
  }

  // MARK: ffmpeg over HTTP

  @Test(arguments: ["tail-index.mp4", "faststart.mp4", "hls/master.m3u8"])
  func ffprobeReadsFixturesOverHTTP(file: String) async throws {
    try await withFileOrigin { origin in
      let local = try await probedDuration("\(mediaFixturesDirectory)/\(file)")
      let remote = try await probedDuration(origin.url(file: file))
      #expect(remote == local)
      let seconds = try #require(Double(remote), "ffprobe printed '\(remote)'")
      #expect(abs(seconds - 4) < 0.1, "duration \(seconds)")

      if file == "tail-index.mp4" {
        // The index is at the tail: ffprobe must have asked for it with a Range request.
        let size = try mediaFixture(file).count
        let moov = try #require(topLevelAtoms(try mediaFixture(file))["moov"])
        let starts = origin.requests(for: file).compactMap { record -> Int? in
          guard let range = record.range, range.hasPrefix("bytes=") else { return nil }
          return Int(range.dropFirst("bytes=".count).prefix { $0 != "-" })
        }
        #expect(starts.contains { $0 > size / 2 && $0 <= moov }, "Range starts: \(starts), moov at \(moov)")
      }
      if file == "hls/master.m3u8" {
        // Every variant playlist, and the AES key, were fetched over HTTP (relative URIs resolved).
        for path in ["hls/v0/index.m3u8", "hls/v1/index.m3u8", "hls/v2/index.m3u8", "hls/v1/key.bin"] {
          #expect(
            origin.requests(for: path).contains { [200, 206].contains($0.status) }, "\(path) not fetched")
        }
      }
      #expect(origin.allRequests().allSatisfy { [200, 206].contains($0.status) }, "\(origin.allRequests())")
    }
  }

  @Test(arguments: [
    "tail-index.mp4", "faststart.mp4", "hls/master.m3u8", "hls/v0/index.m3u8", "hls/v1/index.m3u8",
    "hls/v2/index.m3u8",
  ])
  func ffmpegDecodesTheSameFramesOverHTTP(file: String) async throws {
    try await withFileOrigin { origin in
      let local = try await frameHashes("\(mediaFixturesDirectory)/\(file)")
      let remote = try await frameHashes(origin.url(file: file))
      #expect(remote == local)
      let videoFrames = local.split(separator: "\n").filter { $0.hasPrefix("0,") }.count
      #expect(videoFrames == 100, "\(videoFrames) video frames")
      if file == "hls/v1/index.m3u8" {
        #expect(origin.requests(for: "hls/v1/key.bin").contains { [200, 206].contains($0.status) })
      }
      #expect(origin.allRequests().allSatisfy { [200, 206].contains($0.status) }, "\(origin.allRequests())")
    }
  }

  // Not the master playlist: with -ss, ffmpeg 5.1 fails on its fMP4 variant v2 ("Invalid NAL unit size",
  // locally too: the same ffmpeg problem with seeking in fMP4 HLS as below).
  @Test(arguments: [
    "tail-index.mp4", "faststart.mp4", "hls/v0/index.m3u8", "hls/v1/index.m3u8", "hls/v2/index.m3u8",
  ])
  func ffmpegSeeksTheSameOverHTTP(file: String) async throws {
    try await withFileOrigin { origin in
      // ffmpeg starts at the key frame before 2 s and drops the frames before 2 s.
      let local = try await frameHashes("\(mediaFixturesDirectory)/\(file)", seek: 2)
      let remote = try await frameHashes(origin.url(file: file), seek: 2)
      #expect(remote == local)
      let videoFrames = local.split(separator: "\n").filter { $0.hasPrefix("0,") }.count
      if file == "hls/v2/index.m3u8" && videoFrames == 0 {
        // ffmpeg 5.1 (Debian 12) decodes nothing after -ss in an fMP4 HLS variant, locally too (its hls
        // demuxer, not the origin); only the equality above says something then.
      } else {
        #expect((45...55).contains(videoFrames), "\(videoFrames) video frames after -ss 2")
      }
      #expect(origin.allRequests().allSatisfy { [200, 206].contains($0.status) }, "\(origin.allRequests())")
    }
  }
}
