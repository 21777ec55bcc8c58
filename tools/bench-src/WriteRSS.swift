import ArgumentParser
import Foundation
import MediaCache

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// One `dd` pass over the same number of bytes: write from /dev/zero (no fsync, like the relaxed store), then read
/// back to /dev/null; the file is removed afterwards.
func ddPass(root: String, sizeGiB: Int) throws -> (write: Double, read: Double) {
  let path = "\(root)/dd.tmp"
  defer { unlink(path) }
  sync()
  let write = try runDD(
    ["if=/dev/zero", "of=\(path)", "bs=1M", "count=\(sizeGiB * 1024)"], scratchDirectory: root)
  let read = try runDD(["if=\(path)", "of=/dev/null", "bs=1M"], scratchDirectory: root)
  return (write, read)
}

struct WriteRSSCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "write-rss",
    abstract: "Write and read back one large object through the library; report peak memory.",
    discussion: """
      Writes one G GiB object (default 4) in 1 MiB pieces through FileHandleAssetDataManager into a \
      relaxed-durability ShardedStore at DIR (chunk size C MiB or K KiB, default 1 MiB), reads it back with \
      bytes(in:), reports peak RSS and throughput against `dd` (run before and after), then removes the object.
      """)

  @Option var cache: String
  @Option var sizeGib: Positive = 4
  @Option var chunkMib: Positive = 1
  @Option var chunkKib: Positive?
  @Flag var noDd = false
  @Flag var json = false

  func run() async throws {
    let root = cache
    let sizeGiB = sizeGib.value
    let chunkSize =
      chunkKib != nil
      ? (chunkKib?.value ?? 1024) << 10
      : chunkMib.value << 20
    let chunkText = chunkSize % (1 << 20) == 0 ? "\(chunkSize >> 20) MiB" : "\(chunkSize >> 10) KiB"
    let useDD = !noDd
    let total = Int64(sizeGiB) << 30
    let pieceSize = 1 << 20

    let start = MemorySnapshot.now()
    let store = try ShardedStore(root: root, chunkSize: chunkSize, durability: .relaxed)
    // dd runs before and after the library: on a VM the first writer to touch fresh guest pages pays extra, so
    // one dd pass alone would favour whoever goes second. The baseline is the faster of the two.
    let ddBefore = useDD ? try ddPass(root: store.root, sizeGiB: sizeGiB) : nil

    let key = CacheKey("mediacache-bench/write-rss/\(getpid())/\(UUID().uuidString)")
    let id = key.objectID
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: pieceSize, alignment: 4096)
    defer { buffer.deallocate() }
    var random = XorShift(state: 0x0123_4567_89AB_CDEF)
    random.fill(buffer)

    // Write: one reused 1 MiB buffer; each piece stamps its index at the start of every 4 KiB page so that
    // every chunk's bytes (and CRC) differ at the cost of 256 stores.
    let writer = try FileHandleAssetDataManager(store: store, id: id, writable: true)
    try writer.setContentLength(total)
    // Start each timed write with no dirty pages from earlier work, so writeback throttling hits every writer alike.
    sync()
    let beforeWrite = MemorySnapshot.now()
    let pieces = Int(total / Int64(pieceSize))
    let (_, writeSeconds) = try timed {
      for index in 0..<pieces {
        for page in stride(from: 0, to: pieceSize, by: 4096) {
          buffer.storeBytes(of: UInt64(index).littleEndian, toByteOffset: page, as: UInt64.self)
        }
        try writer.write(UnsafeRawBufferPointer(buffer), at: Int64(index) * Int64(pieceSize))
      }
      try writer.close()
    }
    let afterWrite = MemorySnapshot.now()

    // Read back through the verified stream, a fresh read-only manager; check the count and each stamp.
    let reader = try FileHandleAssetDataManager(store: store, id: id, writable: false)
    guard reader.manifest.isComplete else { throw BenchError("the object is not complete after close()") }
    let clock = ContinuousClock()
    let readStart = clock.now
    var readBytes: Int64 = 0
    for try await piece in reader.bytes(in: 0..<total) {
      try piece.withUnsafeBytes { raw in
        // Check the stamp at every 1 MiB boundary inside this piece.
        var boundary = (readBytes + Int64(pieceSize) - 1) / Int64(pieceSize) * Int64(pieceSize)
        while boundary < readBytes + Int64(raw.count) {
          let stamp = UInt64(
            littleEndian: raw.loadUnaligned(fromByteOffset: Int(boundary - readBytes), as: UInt64.self))
          guard stamp == UInt64(boundary / Int64(pieceSize)) else {
            throw BenchError("wrong bytes at offset \(boundary): stamp \(stamp)")
          }
          boundary += Int64(pieceSize)
        }
      }
      readBytes += Int64(piece.count)
    }
    let readSeconds = seconds(clock.now - readStart)
    try reader.close()
    let afterRead = MemorySnapshot.now()
    guard readBytes == total else { throw BenchError("read back \(readBytes) of \(total) bytes") }
    let freed = try store.remove(id)
    let ddAfter = useDD ? try ddPass(root: store.root, sizeGiB: sizeGiB) : nil

    let writeSpeed = mibPerSecond(total, writeSeconds)
    let readSpeed = mibPerSecond(total, readSeconds)
    let peakBefore = beforeWrite.vmHWMKiB ?? beforeWrite.maxRSSKiB
    let peakAfterWrite = afterWrite.vmHWMKiB ?? afterWrite.maxRSSKiB
    let peakAfterRead = afterRead.vmHWMKiB ?? afterRead.maxRSSKiB

    var report = Report()
    report.line(
      "write-rss: \(sizeGiB) GiB object, chunk \(chunkText) (\(total / Int64(chunkSize)) chunks), 1 MiB pieces, relaxed durability, cache \(store.root)"
    )
    report.line("  peak RSS at start:        \(start.text)")
    report.line("  peak RSS before writing:  \(beforeWrite.text)")
    report.line("  peak RSS after writing:   \(afterWrite.text)")
    report.line("  peak RSS after reading:   \(afterRead.text)")
    report.line(
      "  peak RSS growth:          write +\(fixed(Double(peakAfterWrite - peakBefore) / 1024, 2)) MiB,"
        + " write+read +\(fixed(Double(peakAfterRead - peakBefore) / 1024, 2)) MiB")
    report.line(
      "  write: \(fixed(writeSeconds, 2)) s, \(fixed(writeSpeed)) MiB/s (1 MiB write() calls, then close(); sync() before)"
    )
    report.line(
      "  read:  \(fixed(readSeconds, 2)) s, \(fixed(readSpeed)) MiB/s (bytes(in:), every chunk CRC-checked)")

    report.set("command", .string("write-rss"))
    report.set("cache", .string(store.root))
    report.set("size_bytes", .integer(total))
    report.set("chunk_bytes", .integer(Int64(chunkSize)))
    report.set("piece_bytes", .integer(Int64(pieceSize)))
    report.set("durability", .string("relaxed"))
    report.set("memory_start", start.json)
    report.set("memory_before_write", beforeWrite.json)
    report.set("memory_after_write", afterWrite.json)
    report.set("memory_after_read", afterRead.json)
    report.set("peak_rss_growth_write_kib", .integer(peakAfterWrite - peakBefore))
    report.set("peak_rss_growth_total_kib", .integer(peakAfterRead - peakBefore))
    report.set("write_seconds", .number(writeSeconds))
    report.set("write_mib_s", .number(writeSpeed))
    report.set("read_seconds", .number(readSeconds))
    report.set("read_mib_s", .number(readSpeed))
    report.set("read_bytes", .integer(readBytes))
    if let ddBefore, let ddAfter {
      let ddWrite = max(mibPerSecond(total, ddBefore.write), mibPerSecond(total, ddAfter.write))
      let ddRead = max(mibPerSecond(total, ddBefore.read), mibPerSecond(total, ddAfter.read))
      report.line(
        "  dd write (bs=1M, no fsync): before \(fixed(mibPerSecond(total, ddBefore.write))), after"
          + " \(fixed(mibPerSecond(total, ddAfter.write))) MiB/s; library/best dd = \(fixed(writeSpeed / ddWrite, 2))"
      )
      report.line(
        "  dd read  (bs=1M):           before \(fixed(mibPerSecond(total, ddBefore.read))), after"
          + " \(fixed(mibPerSecond(total, ddAfter.read))) MiB/s; library/best dd = \(fixed(readSpeed / ddRead, 2))"
      )
      report.set("dd_write_mib_s_before", .number(mibPerSecond(total, ddBefore.write)))
      report.set("dd_write_mib_s_after", .number(mibPerSecond(total, ddAfter.write)))
      report.set("ratio_write_to_dd", .number(writeSpeed / ddWrite))
      report.set("dd_read_mib_s_before", .number(mibPerSecond(total, ddBefore.read)))
      report.set("dd_read_mib_s_after", .number(mibPerSecond(total, ddAfter.read)))
      report.set("ratio_read_to_dd", .number(readSpeed / ddRead))
    }
    report.line(
      "  removed the object (\(fixed(Double(freed) / 1_048_576, 1)) MiB freed)\(useDD ? " and dd.tmp" : "")")
    report.set("freed_bytes", .integer(freed))
    report.emit(json: json)
  }
}
