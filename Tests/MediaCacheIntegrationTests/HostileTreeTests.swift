import Foundation
import MediaCache
import MediaCacheTestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A cache tree that someone (or something) has tampered with: data files, manifests or shard directories
/// replaced by symlinks or FIFOs, files where directories should be, a crowded `tmp/`, files of another owner.
/// The binaries must never follow a symlink out of the tree, never hang, say what is wrong in one line, and keep
/// serving every other object.
@Suite(.serialized) struct HostileTreeTests {
  let mediacache = binary("mediacache")
  let compactor = binary("cache-compactor")
  let fsck = binary("cache-fsck")

  /// A cache with two complete objects (`a` and `b`, five 64 KiB chunks each) imported by the CLI, and a
  /// directory outside it.
  struct Tree {
    let directory: TemporaryDirectory
    let cache: String
    let outside: String
    let bytes: Data
    let store: ShardedStore
    let a = "https://hostile.example/a.mp4"
    let b = "https://hostile.example/b.mp4"

    init(keys: [String] = []) async throws {
      directory = try TemporaryDirectory()
      cache = directory.file("cache")
      outside = directory.file("outside")
      try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
      bytes = randomBytes(count: 300_000, seed: 1234)
      let source = directory.file("source.bin")
      try bytes.write(to: URL(fileURLWithPath: source))
      for key in [a, b] + keys {
        let result = try await run(
          binary("mediacache"), ["import", "--cache", cache, "--chunk-size", "65536", key, source])
        #expect(result.status == 0, "\(result.stderr)")
      }
      store = try ShardedStore(root: cache)
    }

    /// Where the object of `key` lives (computed, nothing is read).
    func paths(_ key: String) -> ObjectPaths { store.paths(for: CacheKey(key).objectID) }
  }

  /// Runs a command; one that is still running after 20 s is killed and recorded as an issue (a hang).
  func command(_ program: String, _ arguments: [String]) async throws -> CommandResult {
    let child = try ChildProcess(program, arguments)
    child.closeInput()
    return await child.wait(timeout: 20)
  }

  /// `cat` of `b` still prints its bytes.
  func expectServed(_ tree: Tree, _ key: String, sourceLocation: SourceLocation = #_sourceLocation)
    async throws
  {
    let result = try await command(mediacache, ["cat", "--cache", tree.cache, key])
    #expect(result.status == 0, "\(result.stderr)", sourceLocation: sourceLocation)
    #expect(
      result.stdout == tree.bytes, "cat \(key): \(result.stdout.count) bytes", sourceLocation: sourceLocation)
  }

  /// A command refused the object: a failure status, nothing on standard output, one line on standard error.
  func expectRefused(
    _ result: CommandResult, _ what: String, sourceLocation: SourceLocation = #_sourceLocation
  ) {
    #expect(result.status != 0, "\(what) succeeded", sourceLocation: sourceLocation)
    #expect(
      result.stdout.isEmpty, "\(what) printed \(result.stdout.count) bytes", sourceLocation: sourceLocation)
    #expect(
      result.stderr.split(separator: "\n").count == 1, "\(what): \(result.stderr)",
      sourceLocation: sourceLocation)
  }

  /// Every command that reads, writes, removes, evicts, checks or repairs `a` (in that order; `b` is served
  /// before the eviction that takes it), each finishing within 20 s.
  func exerciseEverything(_ tree: Tree, refusesA: Bool = true) async throws {
    let cat = try await command(mediacache, ["cat", "--cache", tree.cache, tree.a])
    if refusesA { expectRefused(cat, "cat a") }
    try await expectServed(tree, tree.b)
    let source = tree.directory.file("source.bin")
    let write = try await command(
      mediacache,
      ["import", "--cache", tree.cache, tree.a, source, "--range", "0-99999", "--length", "300000"])
    if refusesA { expectRefused(write, "import a") }
    let remove = try await command(mediacache, ["rm", "--cache", tree.cache, tree.a])
    if refusesA { expectRefused(remove, "rm a") }
    _ = try await command(mediacache, ["ls", "--cache", tree.cache])
    let pass = try await command(compactor, [tree.cache, "--max-size", "1", "--scrub", "1G"])
    #expect(pass.status == 0, "\(pass.stderr)")
    _ = try await command(fsck, [tree.cache, "-n"])
    _ = try await command(fsck, [tree.cache, "--repair"])
    _ = try await command(mediacache, ["clear", "--cache", tree.cache])
  }

  /// The files under `path`, with their contents.
  func contents(_ path: String) throws -> [String: Data] {
    var result: [String: Data] = [:]
    let enumerator = FileManager.default.enumerator(atPath: path)
    while let name = enumerator?.nextObject() as? String {
      var isDirectory: ObjCBool = false
      if FileManager.default.fileExists(atPath: "\(path)/\(name)", isDirectory: &isDirectory),
        !isDirectory.boolValue
      {
        result[name] = try Data(contentsOf: URL(fileURLWithPath: "\(path)/\(name)"))
      }
    }
    return result
  }

  @Test func aDataFileReplacedByASymlinkIsNeverFollowed() async throws {
    let tree = try await Tree()
    defer { tree.directory.cleanup() }
    let target = "\(tree.outside)/a.data"
    try FileManager.default.moveItem(atPath: tree.paths(tree.a).data, toPath: target)
    try FileManager.default.createSymbolicLink(atPath: tree.paths(tree.a).data, withDestinationPath: target)
    let before = try contents(tree.outside)
    try await exerciseEverything(tree)
    #expect(try contents(tree.outside) == before, "a file outside the cache changed")
  }

  /// Opening a FIFO for reading blocks until a writer comes: the binaries must not open one at all.
  @Test(arguments: [true, false])
  func aFIFOWhereTheDataFileShouldBeNeverBlocks(throughSymlink: Bool) async throws {
    let tree = try await Tree()
    defer { tree.directory.cleanup() }
    let data = tree.paths(tree.a).data
    try FileManager.default.removeItem(atPath: data)
    if throughSymlink {
      #expect(mkfifo("\(tree.outside)/fifo", 0o600) == 0)
      try FileManager.default.createSymbolicLink(atPath: data, withDestinationPath: "\(tree.outside)/fifo")
    } else {
      #expect(mkfifo(data, 0o600) == 0)
    }
    try await exerciseEverything(tree)
  }

  @Test(arguments: ["outer", "inner"])
  func aShardDirectoryReplacedByASymlinkIsNeverFollowed(level: String) async throws {
    let tree = try await Tree()
    defer { tree.directory.cleanup() }
    let paths = tree.paths(tree.a)
    let shard = level == "outer" ? paths.outerShard : paths.directory
    try #require(!tree.paths(tree.b).directory.hasPrefix(shard + "/"), "a and b share the shard")
    let target = "\(tree.outside)/shard"
    try FileManager.default.moveItem(atPath: shard, toPath: target)
    try FileManager.default.createSymbolicLink(atPath: shard, withDestinationPath: target)
    let before = try contents(tree.outside)
    #expect(before.count == 2)
    try await exerciseEverything(tree)
    #expect(try contents(tree.outside) == before, "a file outside the cache changed")
  }

  @Test(arguments: [true, false])
  func aManifestReplacedByASymlinkIsNeverFollowed(toFIFO: Bool) async throws {
    let tree = try await Tree()
    defer { tree.directory.cleanup() }
    let manifest = tree.paths(tree.a).manifest
    let target = "\(tree.outside)/a.manifest"
    if toFIFO {
      try FileManager.default.removeItem(atPath: manifest)
      #expect(mkfifo(target, 0o600) == 0)
    } else {
      try FileManager.default.moveItem(atPath: manifest, toPath: target)
    }
    try FileManager.default.createSymbolicLink(atPath: manifest, withDestinationPath: target)
    let before = try toFIFO ? [:] : contents(tree.outside)
    try await exerciseEverything(tree)
    if !toFIFO { #expect(try contents(tree.outside) == before, "a file outside the cache changed") }
  }

  /// A regular file where `objects/`, a shard directory or `tmp/` should be: the objects it hides are misses
  /// or clear errors, the others are served, and `cache-fsck` reports it (and, never deleting a file it does
  /// not know, leaves it).
  @Test(arguments: ["outer shard", "inner shard", "tmp", "objects"])
  func aFileWhereADirectoryShouldBe(place: String) async throws {
    let tree = try await Tree()
    defer { tree.directory.cleanup() }
    let paths = tree.paths(tree.a)
    let path: String
    switch place {
    case "outer shard": path = paths.outerShard
    case "inner shard": path = paths.directory
    case "tmp": path = "\(tree.cache)/tmp"
    default: path = "\(tree.cache)/objects"
    }
    try #require(!tree.paths(tree.b).directory.hasPrefix(path + "/") || place == "tmp" || place == "objects")
    try FileManager.default.removeItem(atPath: path)
    try Data("not a directory\n".utf8).write(to: URL(fileURLWithPath: path))
    let cat = try await command(mediacache, ["cat", "--cache", tree.cache, tree.a])
    if place != "tmp" { expectRefused(cat, "cat a") }
    if place != "objects" { try await expectServed(tree, tree.b) }
    let write = try await command(
      mediacache,
      ["import", "--cache", tree.cache, tree.a, tree.directory.file("source.bin"), "--range", "0-99"])
    expectRefused(write, "import a")
    let check = try await command(fsck, [tree.cache, "-n"])
    #expect(check.status == 4, "cache-fsck -n: \(check.text)")
    #expect(check.text.contains(String(path.dropFirst(tree.cache.count + 1))), "\(check.text)")
    let repair = try await command(fsck, [tree.cache, "--repair"])
    #expect(repair.status & 4 == 4, "cache-fsck --repair: \(repair.text)")
    let pass = try await command(compactor, [tree.cache, "--max-size", "1"])
    #expect(pass.status == 0, "\(pass.stderr)")
    #expect(FileManager.default.fileExists(atPath: path), "the file was deleted")
  }

  /// `tmp/` crowded with 20,000 staging files (half of them left by writers long dead) and entries that are not
  /// staging files at all: writing still works, only stale regular files are reaped, nothing is followed.
  @Test func aFullTmpDirectory() async throws {
    let tree = try await Tree()
    defer { tree.directory.cleanup() }
    let tmp = "\(tree.cache)/tmp"
    let old = Date().addingTimeInterval(-7200).timeIntervalSince1970
    for index in 0..<20_000 {
      let path = "\(tmp)/\(String(repeating: "e", count: 64)).\(index).\(index).manifest"
      let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
      #expect(descriptor >= 0)
      close(descriptor)
      if index % 2 == 0 {
        var times = [timespec(tv_sec: Int(old), tv_nsec: 0), timespec(tv_sec: Int(old), tv_nsec: 0)]
        utimensat(AT_FDCWD, path, &times, 0)
      }
    }
    try Data("precious\n".utf8).write(to: URL(fileURLWithPath: "\(tree.outside)/precious"))
    try FileManager.default.createSymbolicLink(
      atPath: "\(tmp)/link", withDestinationPath: "\(tree.outside)/precious")
    try FileManager.default.createSymbolicLink(atPath: "\(tmp)/dirlink", withDestinationPath: tree.outside)
    try FileManager.default.createDirectory(atPath: "\(tmp)/directory", withIntermediateDirectories: false)
    #expect(mkfifo("\(tmp)/fifo", 0o600) == 0)
    var times = [timespec(tv_sec: Int(old), tv_nsec: 0), timespec(tv_sec: Int(old), tv_nsec: 0)]
    for name in ["link", "dirlink", "directory", "fifo"] {
      utimensat(AT_FDCWD, "\(tmp)/\(name)", &times, AT_SYMLINK_NOFOLLOW)
    }

    let check = try await fsckJSON([tree.cache, "-n"])
    #expect(check.status == 4)
    #expect(check.findings.filter { $0.kind == .staleTemporaryFile }.count == 10_000)
    #expect(check.findings.filter { $0.kind == .unknownEntry }.count == 4)
    // A writer opening the cache reaps the stale staging files (regular files only) and writes as usual.
    let write = try await command(
      mediacache,
      ["import", "--cache", tree.cache, "https://hostile.example/c", tree.directory.file("source.bin")])
    #expect(write.status == 0, "\(write.stderr)")
    let left = try FileManager.default.contentsOfDirectory(atPath: tmp)
    #expect(left.count == 10_004, "\(left.count) entries left in tmp/")
    try await expectServed(tree, "https://hostile.example/c")
    let pass = try await command(compactor, [tree.cache, "--tmp-grace", "0s"])
    #expect(pass.status == 0, "\(pass.stderr)")
    #expect(
      Set(try FileManager.default.contentsOfDirectory(atPath: tmp)) == [
        "link", "dirlink", "directory", "fifo",
      ])
    #expect(try String(contentsOfFile: "\(tree.outside)/precious", encoding: .utf8) == "precious\n")
    let recheck = try await command(fsck, [tree.cache, "-n"])
    #expect(recheck.status == 0, "\(recheck.text)")
  }

  /// Files of another owner, or without permission bits, as an unprivileged user meets them (the test runs the
  /// binaries as `nobody` through setpriv; as root, permission bits do not apply). The object becomes a clear
  /// error, the others are served, the compactor goes on, and `cache-fsck` reports the file instead of calling
  /// it busy.
  @Test func filesOfAnotherOwnerOrWithoutPermissions() async throws {
    guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") else { return }
    let c = "https://hostile.example/c.mp4"
    let tree = try await Tree(keys: [c])
    defer { tree.directory.cleanup() }
    // The binaries run as nobody; the cache (and the way to it) is theirs, except that a's data file belongs to
    // root and c's manifest has mode 0000.
    #expect(chmod(tree.directory.path, 0o755) == 0)
    _ = try await run("/bin/chown", ["-R", "65534:65534", tree.cache])
    #expect(chown(tree.paths(tree.a).data, 0, 0) == 0)
    #expect(chmod(tree.paths(c).manifest, 0) == 0)
    func asNobody(_ program: String, _ arguments: [String]) async throws -> CommandResult {
      try await command(
        "/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", program] + arguments)
    }
    for key in [tree.a, c] {
      let cat = try await asNobody(mediacache, ["cat", "--cache", tree.cache, key])
      expectRefused(cat, "cat \(key)")
      #expect(cat.stderr.contains("Permission denied"), "\(cat.stderr)")
    }
    let served = try await asNobody(mediacache, ["cat", "--cache", tree.cache, tree.b])
    #expect(served.status == 0 && served.stdout == tree.bytes, "\(served.stderr)")
    let check = try await asNobody(fsck, [tree.cache, "-n", "--json"])
    let report = try FsckReport(check)
    #expect(report.status == 4, "\(report.raw)")
    #expect(
      report.findings.contains { $0.kind == .unreadable && $0.path.hasSuffix(".data") }, "\(report.raw)")
    #expect(
      report.findings.contains { $0.kind == .unreadable && $0.path.hasSuffix(".manifest") }, "\(report.raw)")
    #expect(report.totals?.busy == 0, "\(report.raw)")
    let repair = try await asNobody(fsck, [tree.cache, "--repair"])
    #expect(repair.status == 4, "\(repair.text)")
    for path in [tree.paths(tree.a).data, tree.paths(c).manifest] {
      #expect(FileManager.default.fileExists(atPath: path), "repair deleted \(path)")
    }
    let pass = try await asNobody(compactor, [tree.cache, "--max-size", "1"])
    #expect(pass.status == 0, "\(pass.stderr)")
    #expect(pass.text.contains("object(s) failed"), "\(pass.text)")
    #expect(!FileManager.default.fileExists(atPath: tree.paths(tree.b).data))
  }
}
