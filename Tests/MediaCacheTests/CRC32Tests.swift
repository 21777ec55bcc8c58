import Foundation
import Testing

@testable import MediaCache

/// The folded CRC-32 must equal zlib's for every length, alignment and starting value: it checks chunks
/// written by any earlier version and by other tools.
@Suite struct CRC32Tests {
  @Test func usesTheFastestFoldThisCPUHas() throws {
    let flags = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
    #if arch(x86_64)
      if flags.contains(" vpclmulqdq") && flags.contains(" avx512f") {
        #expect(CRC32.accelerationLevel == 2)
      } else if flags.contains(" pclmulqdq") {
        #expect(CRC32.accelerationLevel == 1)
      }
    #else
      #expect(CRC32.accelerationLevel == 0)
    #endif
  }

  @Test(arguments: [0, 1, 2])
  func equalsZlibForEveryLengthAndAlignment(level: Int) {
    var generator = SystemRandomNumberGenerator()
    let bytes = [UInt8]((0..<5000).map { _ in UInt8.random(in: 0...255, using: &generator) })
    bytes.withUnsafeBytes { all in
      for offset in 0..<16 {
        for length in 0...(all.count - 16) where length < 1100 || length % 97 == 0 {
          let slice = UnsafeRawBufferPointer(rebasing: all[offset..<(offset + length)])
          let initial = UInt32.random(in: 0...UInt32.max, using: &generator)
          let folded = CRC32.checksum(slice, initial: initial, level: level)
          let reference = CRC32.zlibChecksum(slice, initial: initial)
          if folded != reference {
            Issue.record(
              "level \(level) offset \(offset) length \(length) initial \(initial): \(folded) != zlib \(reference)"
            )
            return
          }
        }
      }
    }
  }

  @Test func knownValuesAndChaining() {
    #expect(CRC32.checksum(Data("123456789".utf8)) == 0xCBF4_3926)
    let zeros = Data(count: 1 << 20)
    #expect(CRC32.checksum(zeros) == zeros.withUnsafeBytes { CRC32.zlibChecksum($0) })
    let data = Data((0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 7) })
    let whole = CRC32.checksum(data)
    #expect(whole == data.withUnsafeBytes { CRC32.zlibChecksum($0) })
    // Continuing from a partial CRC, at a cut that is not a multiple of 16.
    let cut = 1_048_583
    let chained = CRC32.checksum(data[cut...], initial: CRC32.checksum(data[..<cut]))
    #expect(chained == whole)
    #expect(
      CRC32.combine(
        CRC32.checksum(data[..<cut]), CRC32.checksum(data[cut...]), lengthOfB: Int64(data.count - cut))
        == whole)
  }
}
