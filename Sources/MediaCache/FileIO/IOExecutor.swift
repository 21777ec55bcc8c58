import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A bounded pool of threads where the library's blocking file-system calls run, so that none runs on an event
/// loop or on Swift's cooperative pool (whose few threads, one per core, every task of the process shares).
///
/// The async API of the library (`MediaCache.store`, `data`, `status`, `remove`, `ChunkReadSequence`) and the
/// read engine (opening objects, reading cached chunks, writing origin bytes, evicting on a full disk, closing)
/// hand their calls to `IOExecutor.shared` with `run(_:)`, as NIOFileSystem's `FileSystem` does with its
/// `NIOThreadPool` (`runIfActive`), or with `submit(_:)` where the result is waited for later (the piece
/// `ChunkReadSequence` reads ahead; its CRC check, CPU only, runs where the sequence is iterated). Calls are
/// started in the order they were submitted.
public final class IOExecutor: Sendable {
  /// The executor the library uses: `max(4, cores)` threads (the calls wait on the disk more than they
  /// compute), or `MEDIACACHE_IO_THREADS` (1…256) when set.
  public static let shared = IOExecutor(threads: defaultThreads, name: "MediaCache.io")

  static var defaultThreads: Int {
    if let text = ProcessInfo.processInfo.environment["MEDIACACHE_IO_THREADS"], let count = Int(text),
      (1...256).contains(count)
    {
      return count
    }
    return max(4, ProcessInfo.processInfo.activeProcessorCount)
  }

  private struct State {
    var queue: [@Sendable () -> Void] = []
    /// Index of the next job in `queue` (the array is compacted when it is drained).
    var head = 0
  }

  private let state = Mutex(State())
  private let condition = NSCondition()
  /// Jobs waiting (for `pending`, a figure for tests and metrics).
  private let waiting = Atomic<Int>(0)

  /// Starts `threads` threads named `name`; they live as long as the process (the shared executor's do).
  public init(threads: Int, name: String) {
    for index in 0..<max(1, threads) {
      let threadName = "\(name)-\(index)"
      let thread = Thread { [self] in
        markCurrentThreadIO()
        // Named from the thread itself, with the system's call, so the system shows it (`top -H`, `perf`,
        // `/proc/PID/task/*/comm`). Foundation's `Thread.name` does not do it reliably on Linux: it reaches the
        // system only once `start()` has stored the new thread's handle, which the new thread can outrun, and
        // the thread then keeps the name of the Dispatch worker that started it ("oot.default-qos"), looking
        // like Swift's cooperative pool in a profile.
        nameCurrentThread(threadName)
        // Foundation's name too: Darwin's `Thread.name` reports its own, not the system's (Linux's reads the
        // system's), and `BlockingCallCheck` names the thread by it.
        Thread.current.name = threadName
        work()
      }
      thread.stackSize = 512 << 10
      thread.start()
    }
  }

  /// Jobs submitted and not yet started.
  public var pending: Int { waiting.load(ordering: .relaxed) }

  /// Runs `body` on one of the executor's threads and returns what it returns (or throws what it throws).
  /// The calling task waits without holding a thread.
  public func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    if Self.isCurrentThreadIO { return try body() }
    return try await withCheckedThrowingContinuation { continuation in
      submit { continuation.resume(with: Result { try body() }) }
    }
  }

  /// Runs `body` on one of the executor's threads, later; the caller does not wait. `body` must not throw
  /// away errors the caller needs: it reports them itself (a completion, a promise).
  public func submit(_ body: @escaping @Sendable () -> Void) {
    waiting.add(1, ordering: .relaxed)
    condition.lock()
    state.withLock { $0.queue.append(body) }
    condition.signal()
    condition.unlock()
  }

  private func work() {
    while true {
      condition.lock()
      var job = takeJob()
      while job == nil {
        condition.wait()
        job = takeJob()
      }
      condition.unlock()
      waiting.subtract(1, ordering: .relaxed)
      job!()
    }
  }

  private func takeJob() -> (@Sendable () -> Void)? {
    state.withLock { state in
      guard state.head < state.queue.count else { return nil }
      let job = state.queue[state.head]
      state.head += 1
      if state.head == state.queue.count {
        state.queue.removeAll(keepingCapacity: true)
        state.head = 0
      } else if state.head >= 1024 {
        state.queue.removeFirst(state.head)
        state.head = 0
      }
      return job
    }
  }

  /// Whether the calling thread is one of an `IOExecutor`'s.
  public static var isCurrentThreadIO: Bool { pthread_getspecific(ioThreadKey) != nil }
}

/// An `IOExecutor` can also run tasks (`Task(executorPreference: IOExecutor.shared)`): a task whose work is
/// mostly blocking calls, such as the proxy answering from the cache, then makes them inline (`run(_:)` on one of
/// the executor's threads calls its body at once) instead of handing each to another thread and back. Such a
/// task holds a thread only while it runs; awaiting something else frees it.
extension IOExecutor: TaskExecutor {
  /// Runs `job` on one of the executor's threads, in submission order with the blocking calls.
  public func enqueue(_ job: consuming ExecutorJob) {
    let job = UnownedJob(job)
    submit { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
  }
}

/// Marks the threads of every `IOExecutor` (a thread-specific value, set once per thread).
private let ioThreadKey: pthread_key_t = {
  var key = pthread_key_t()
  pthread_key_create(&key, nil)
  return key
}()

private func markCurrentThreadIO() {
  pthread_setspecific(ioThreadKey, UnsafeRawPointer(bitPattern: 1))
}
