#if canImport(Glibc)
  import Glibc
  import Testing

  /// How many pages of `range` of the file at `path` are in the page cache (`mincore` of a mapping, which reads
  /// nothing).
  public func residentPages(_ path: String, _ range: Range<Int64>) throws -> Int {
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    try #require(descriptor >= 0)
    defer { close(descriptor) }
    let page = Int64(sysconf(Int32(_SC_PAGESIZE)))
    let start = range.lowerBound / page * page
    let length = Int(range.upperBound - start)
    let mapped = mmap(nil, length, PROT_READ, MAP_SHARED, descriptor, off_t(start))
    try #require(mapped != MAP_FAILED, "mmap: errno \(errno)")
    defer { munmap(mapped, length) }
    var vector = [UInt8](repeating: 0, count: (length + Int(page) - 1) / Int(page))
    try #require(mincore(mapped, length, &vector) == 0, "mincore: errno \(errno)")
    return vector.filter { $0 & 1 != 0 }.count
  }

  /// Writes the file at `path` back and asks the kernel to drop its pages from the page cache (advice: pages
  /// still being written back can stay; `residentPages` tells).
  public func dropPageCache(_ path: String) throws {
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    try #require(descriptor >= 0)
    defer { close(descriptor) }
    try #require(fsync(descriptor) == 0)
    try #require(posix_fadvise(descriptor, 0, 0, POSIX_FADV_DONTNEED) == 0)
  }

  /// `dropPageCache` until no page of `range` is in the page cache, up to 50 tries 20 ms apart (pages still
  /// being written back can stay at first); whether they went.
  public func dropPageCache(_ path: String, until range: Range<Int64>) throws -> Bool {
    for _ in 0..<50 {
      try dropPageCache(path)
      if try residentPages(path, range) == 0 { return true }
      usleep(20_000)
    }
    return false
  }
#endif
