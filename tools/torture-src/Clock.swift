import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Seconds since an arbitrary start, monotonic.
func monotonicSeconds() -> Double {
  var now = timespec()
  clock_gettime(CLOCK_MONOTONIC, &now)
  return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

func sleepSeconds(_ seconds: Double) {
  guard seconds > 0 else { return }
  usleep(useconds_t(min(seconds, 3600) * 1_000_000))
}

func now() -> Double { Date().timeIntervalSince1970 }
