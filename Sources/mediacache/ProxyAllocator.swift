import Foundation
import Logging
import MediaCache

#if canImport(Glibc)
  import Glibc
#endif

/// The proxy's settings for glibc's allocator, and the thread that gives the heap's free memory back to the
/// system. Glibc only: Darwin's allocator has its own policy, and there both calls do nothing.
enum ProxyAllocator {
  /// Every chunk served passes through a few 1 MiB buffers that are freed right after. glibc's defaults give
  /// such blocks their own mmap and return freed memory to the kernel at once, so each chunk costs fresh page
  /// faults and an madvise: measured, that halved the proxy's cached throughput (tools/bench proxy). Keeping
  /// 1 MiB blocks in one heap lets the buffers be reused; one arena keeps the memory held for reuse from
  /// multiplying by thread count (made before the first thread starts: `MediaCacheCommand.main`; a thread that
  /// has made an arena keeps it). Up to 4 MiB free at the heap's top is kept: 16 MiB (tried first) added
  /// 10-15 MiB to the peak RSS of a cold 1 GiB stream for no measurable speed.
  static func tune() {
    #if canImport(Glibc)
      // Settings given to glibc at exec (GLIBC_TUNABLES=glibc.malloc...) take precedence over these defaults.
      if ProcessInfo.processInfo.environment["GLIBC_TUNABLES"] != nil { return }
      // <malloc.h> is not part of Swift's Glibc module: look the function up, with its documented constants.
      typealias MallocOption = @convention(c) (Int32, Int32) -> Int32
      guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallopt") else { return }
      let mallopt = unsafeBitCast(symbol, to: MallocOption.self)
      let trimThreshold: Int32 = -1  // M_TRIM_THRESHOLD
      let mmapThreshold: Int32 = -3  // M_MMAP_THRESHOLD
      let arenaMax: Int32 = -8  // M_ARENA_MAX
      _ = mallopt(mmapThreshold, 4 << 20)
      _ = mallopt(trimThreshold, 4 << 20)
      _ = mallopt(arenaMax, 1)
    #endif
  }

  /// Starts a thread that looks at the process's resident size every second and, when `HeapTrimSchedule`
  /// says so, gives the heap's free pages back (`malloc_trim`).
  ///
  /// Those settings keep freed buffers in the heap, and glibc returns only what is free at its top: a burst
  /// of slow clients (64 that stopped reading: ~130 MiB of buffers) left the heap that large after they were
  /// gone, free inside but resident, until the process ended. `malloc_trim` releases the free pages anywhere in
  /// the heap (glibc 2.8 and later). It holds the arena's lock while it runs, and with one arena every thread
  /// that allocates meanwhile waits for it (0.4 ms when there was little to give back, 3.5-4.3 ms when it gave
  /// back 41-46 MiB, measured): so it runs on its own thread, and only after growth or every 10 s, not on every
  /// look. Pages it gives back are faulted in again when the heap grows into them. What it gave back is logged
  /// at `debug`.
  static func startGivingBack(logger: Logger) {
    #if canImport(Glibc)
      typealias MallocTrim = @convention(c) (Int) -> Int32
      guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") else { return }
      let trim = unsafeBitCast(symbol, to: MallocTrim.self)
      let thread = Thread {
        // Named from the thread itself (Foundation's `Thread.name` can miss the system on Linux; `IOExecutor`).
        nameCurrentThread("mediacache.trim")
        var schedule = HeapTrimSchedule()
        // The first look is at once: the level before any request is the one a burst is measured from.
        var first = true
        while true {
          if !first { Thread.sleep(forTimeInterval: 1) }
          first = false
          guard let resident = residentBytes() else { continue }
          let now = ContinuousClock.now
          guard schedule.shouldTrim(resident: resident, now: now) else { continue }
          _ = trim(4 << 20)
          let took = now.duration(to: .now).components
          let after = residentBytes() ?? resident
          schedule.trimmed(resident: after, at: now)
          logger.debug(
            "gave the heap's free memory back",
            metadata: [
              "before_mib": "\(resident >> 20)", "after_mib": "\(after >> 20)",
              "ms": "\(Double(took.seconds) * 1000 + Double(took.attoseconds) / 1e15)",
            ])
        }
      }
      thread.stackSize = 256 << 10
      thread.start()
    #endif
  }

  /// The resident size of this process (`/proc/self/statm`), or nil where it cannot be read.
  static func residentBytes() -> Int? {
    #if canImport(Glibc)
      let descriptor = open("/proc/self/statm", O_RDONLY | O_CLOEXEC)
      guard descriptor >= 0 else { return nil }
      defer { close(descriptor) }
      var bytes = [UInt8](repeating: 0, count: 128)
      let count = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
      guard count > 0 else { return nil }
      // "size resident shared text lib data dt", in pages.
      let fields = bytes[..<count].split(separator: UInt8(ascii: " "))
      guard fields.count > 1, let pages = Int(String(decoding: fields[1], as: UTF8.self)) else { return nil }
      return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    #else
      return nil
    #endif
  }
}

/// When the proxy gives its heap's free memory back (`ProxyAllocator.startGivingBack`): at once when the
/// resident size has grown by `growth` above the lowest it was since the last trim (a burst), and every
/// `interval` anyway (the buffers of a burst are freed after it, and a trim that finds nothing to give back
/// costs a walk of the heap's free lists). The first look only notes the level.
struct HeapTrimSchedule {
  /// Growth of the resident size that calls for a trim at once.
  var growth = 16 << 20
  /// The longest the heap goes untrimmed.
  var interval = Duration.seconds(10)
  /// The lowest resident size seen since the last trim (or the first look), the level a trim left included.
  private(set) var floor: Int?
  /// When the last trim ran (or the first look).
  private(set) var last: ContinuousClock.Instant?

  /// Whether to trim now, at `resident` bytes resident.
  mutating func shouldTrim(resident: Int, now: ContinuousClock.Instant) -> Bool {
    guard let floor, let last else {
      trimmed(resident: resident, at: now)
      return false
    }
    self.floor = min(floor, resident)
    return resident >= min(floor, resident) + growth || last.duration(to: now) >= interval
  }

  /// Notes a trim that left the resident size at `resident`.
  mutating func trimmed(resident: Int, at now: ContinuousClock.Instant) {
    floor = resident
    last = now
  }
}
