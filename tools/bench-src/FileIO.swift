import ArgumentParser
import Foundation
import MediaCache

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

enum ReadMethod: String, CaseIterable {
  case fileHandleRead = "FileHandle.read(upToCount:)"
  case fileHandlePread = "FileHandle + pread"
  case positional = "open + pread (library)"
  case dd = "dd bs=1M"

  var key: String {
    switch self {
    case .fileHandleRead: "filehandle_read"
    case .fileHandlePread: "filehandle_pread"
    case .positional: "pread"
    case .dd: "dd"
    }
  }
}

/// Creates the test file if it is missing; returns its size and whether it was created.
func prepareTestFile(path: String, sizeMiB: Int) throws -> (size: Int64, created: Bool) {
  var info = stat()
  if stat(path, &info) == 0 {
    guard (info.st_mode & S_IFMT) == S_IFREG else {
      throw BenchError("\(path) exists and is not a regular file")
    }
    return (Int64(info.st_size), false)
  }
  let temporary = "\(path).partial.\(getpid())"
  let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
  guard fd >= 0 else { throw BenchError("cannot create \(temporary): \(errnoText())") }
  let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 4096)
  defer { buffer.deallocate() }
  var random = XorShift(state: 0x9E37_79B9_7F4A_7C15)
  for piece in 0..<sizeMiB {
    random.fill(buffer)
    var done = 0
    while done < buffer.count {
      let count = pwrite(
        fd, buffer.baseAddress! + done, buffer.count - done, off_t(piece << 20) + off_t(done))
      if count < 0 && errno == EINTR { continue }
      guard count > 0 else {
        let message = errnoText()
        close(fd)
        unlink(temporary)
        throw BenchError("cannot write \(temporary): \(message)")
      }
      done += count
    }
  }
  close(fd)
  guard rename(temporary, path) == 0 else {
    throw BenchError("cannot rename \(temporary) to \(path): \(errnoText())")
  }
  return (Int64(sizeMiB) << 20, true)
}

/// Reads the whole file with `method` in `piece`-byte pieces; returns the bytes read.
func readFile(
  _ path: String, size: Int64, piece: Int, method: ReadMethod, buffer: UnsafeMutableRawBufferPointer
)
  throws -> Int64
{
  var total: Int64 = 0
  switch method {
  case .fileHandleRead:
    // The stream API as an app would use it for a range: seek, then read(upToCount:), a new Data each time.
    guard let handle = FileHandle(forReadingAtPath: path) else { throw BenchError("cannot open \(path)") }
    defer { try? handle.close() }
    var offset: Int64 = 0
    while offset < size {
      try handle.seek(toOffset: UInt64(offset))
      guard let data = try handle.read(upToCount: piece), !data.isEmpty else { break }
      total += Int64(data.count)
      offset += Int64(data.count)
    }
  case .fileHandlePread:
    // FileHandle for opening only; the bytes move with pread on its descriptor into one reused buffer.
    guard let handle = FileHandle(forReadingAtPath: path) else { throw BenchError("cannot open \(path)") }
    defer { try? handle.close() }
    let fd = handle.fileDescriptor
    while total < size {
      let count = pread(fd, buffer.baseAddress, piece, off_t(total))
      if count < 0 && errno == EINTR { continue }
      guard count >= 0 else { throw BenchError("pread \(path): \(errnoText())") }
      if count == 0 { break }
      total += Int64(count)
    }
  case .positional:
    // What SystemFile.read(into:at:) does: open(2) with O_CLOEXEC, pread until the buffer is full or EOF.
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw BenchError("cannot open \(path): \(errnoText())") }
    defer { close(fd) }
    var atEOF = false
    while total < size && !atEOF {
      var done = 0
      while done < piece {
        let count = pread(fd, buffer.baseAddress! + done, piece - done, off_t(total) + off_t(done))
        if count < 0 && errno == EINTR { continue }
        guard count >= 0 else { throw BenchError("pread \(path): \(errnoText())") }
        if count == 0 {
          atEOF = true
          break
        }
        done += count
      }
      total += Int64(done)
    }
  case .dd:
    throw BenchError("dd is run as a subprocess")
  }
  return total
}

struct FileIOCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "fileio",
    abstract: "Compare ways of reading a file sequentially (why the library uses positional reads).",
    discussion: """
      Creates PATH (N MiB of pseudo-random bytes, default 1024) if missing, then reads it sequentially in K KiB \
      pieces (default 1024) with FileHandle.read(upToCount:), FileHandle + pread, and open + pread (the library's \
      way), R rounds (default 4) in rotating order, with `dd bs=1M` as the baseline. The page cache is not \
      dropped: the figures are warm-cache.
      """)

  @Option var file: String
  @Option var sizeMib: Positive = 1024
  @Option var pieceKib: Positive = 1024
  @Option var rounds: Positive = 4
  @Flag var noDd = false
  @Flag var json = false

  func run() throws {
    let path = file
    let sizeMiB = sizeMib.value
    let pieceKiB = pieceKib.value
    let rounds = rounds.value
    let useDD = !noDd
    let piece = pieceKiB * 1024

    let (size, created) = try prepareTestFile(path: path, sizeMiB: sizeMiB)
    guard size > 0 else { throw BenchError("\(path) is empty") }
    let directory =
      (path as NSString).deletingLastPathComponent.isEmpty
      ? "." : (path as NSString).deletingLastPathComponent
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: piece, alignment: 4096)
    defer { buffer.deallocate() }

    let methods = ReadMethod.allCases.filter { useDD || $0 != .dd }
    var speeds: [ReadMethod: [Double]] = [:]
    var syscalls: [ReadMethod: Int64] = [:]
    // What reading /proc/self/io itself costs in read calls, subtracted from each difference.
    let probe = (readSyscallCount() ?? 0, readSyscallCount() ?? 0)
    let probeCost = probe.1 - probe.0

    // Untimed warm-up read: every method then starts from the same (warm) page cache.
    _ = try readFile(path, size: size, piece: piece, method: .positional, buffer: buffer)

    for round in 0..<rounds {
      // Rotate the order each round, and reverse it every other round, so no method always goes first.
      var order = (0..<methods.count).map { methods[($0 + round) % methods.count] }
      if round % 2 == 1 { order.reverse() }
      for method in order {
        let elapsed: Double
        if method == .dd {
          elapsed = try runDD(["if=\(path)", "of=/dev/null", "bs=1M"], scratchDirectory: directory)
        } else {
          let before = readSyscallCount()
          let (bytes, time) = try timed {
            try readFile(path, size: size, piece: piece, method: method, buffer: buffer)
          }
          let after = readSyscallCount()
          guard bytes == size else { throw BenchError("\(method.rawValue) read \(bytes) of \(size) bytes") }
          elapsed = time
          if let before, let after { syscalls[method] = after - before - probeCost }
        }
        speeds[method, default: []].append(mibPerSecond(size, elapsed))
      }
    }

    var report = Report()
    let pieceText = pieceKiB % 1024 == 0 ? "\(pieceKiB / 1024) MiB" : "\(pieceKiB) KiB"
    report.line(
      "fileio: \(path), \(fixed(Double(size) / 1_048_576, 0)) MiB\(created ? " (created)" : ""), \(pieceText) pieces, \(rounds) rounds"
    )
    report.line(
      "note: the page cache is not dropped; the file is warm, so this measures per-call cost and copying, not the disk"
    )
    report.set("command", .string("fileio"))
    report.set("file", .string(path))
    report.set("size_bytes", .integer(size))
    report.set("created", .bool(created))
    report.set("piece_bytes", .integer(Int64(piece)))
    report.set("rounds", .integer(Int64(rounds)))
    report.set("page_cache_dropped", .bool(false))
    var methodFields: [(String, JSON)] = []
    let ddMedian = speeds[.dd].map(median)
    for method in methods {
      let values = speeds[method] ?? []
      let mid = median(values)
      var text =
        "  \(method.rawValue.padding(toLength: 28, withPad: " ", startingAt: 0)) median \(fixed(mid)) MiB/s"
        + "  (min \(fixed(values.min() ?? .nan)), max \(fixed(values.max() ?? .nan)))"
      if let calls = syscalls[method] { text += "  read calls \(calls)" }
      if let ddMedian, method != .dd { text += "  x\(fixed(mid / ddMedian, 2)) of dd" }
      report.line(text)
      var fields: [(String, JSON)] = [
        ("median_mib_s", .number(mid)), ("min_mib_s", .number(values.min() ?? .nan)),
        ("max_mib_s", .number(values.max() ?? .nan)),
      ]
      if let calls = syscalls[method] { fields.append(("read_syscalls", .integer(calls))) }
      if let ddMedian, method != .dd { fields.append(("ratio_to_dd", .number(mid / ddMedian))) }
      methodFields.append((method.key, .object(fields)))
    }
    report.set("methods", .object(methodFields))
    let fileHandle = median(speeds[.fileHandleRead] ?? [])
    let positional = median(speeds[.positional] ?? [])
    let handlePread = median(speeds[.fileHandlePread] ?? [])
    report.line("ratio pread (library) / FileHandle.read(upToCount:): \(fixed(positional / fileHandle, 2))")
    report.line(
      "ratio FileHandle + pread / FileHandle.read(upToCount:): \(fixed(handlePread / fileHandle, 2))")
    report.set("ratio_pread_to_filehandle_read", .number(positional / fileHandle))
    report.set("ratio_filehandle_pread_to_filehandle_read", .number(handlePread / fileHandle))
    report.emit(json: json)
  }
}
