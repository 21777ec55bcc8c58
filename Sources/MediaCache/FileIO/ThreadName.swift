import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Gives the calling thread `name` where the system shows threads. On Linux that is the thread's `comm`, 15
/// bytes, which a thread may write itself (proc(5)); Swift's Glibc module does not offer `pthread_setname_np`.
package func nameCurrentThread(_ name: String) {
  #if canImport(Glibc)
    let descriptor = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
    guard descriptor >= 0 else { return }
    defer { close(descriptor) }
    let bytes = Array(name.utf8.prefix(15))
    _ = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
  #elseif canImport(Darwin)
    _ = pthread_setname_np(name)
  #endif
}
