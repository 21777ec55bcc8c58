import MediaCache
import SystemPackage
import Testing

@testable import MediaCacheHTTP

/// When a miss's first bytes stop being handed over before they are written (`EarlyHandOver`).
@Suite struct EarlyHandOverTests {
  /// A full or failing disk pauses the hand-over; a length the file system cannot hold (`EFBIG` when a new
  /// object's file is made and sized, a number any origin can send) does not, nor does a version change.
  @Test func aDiskErrorPausesTheHandOverAnOriginsImpossibleLengthDoesNot() {
    let early = EarlyHandOver()
    #expect(early.isOn)
    let path = FilePath("/cache/objects/ab/cd/abcd.data")
    early.writeFailed(StoreError.io(operation: "ftruncate", path: path, errno: .fileTooLarge))
    #expect(early.isOn)
    early.writeFailed(StoreError.versionChanged(ObjectID(CacheKey("x")), expected: 1, current: 2))
    #expect(early.isOn)
    early.writeFailed(StoreError.io(operation: "pwrite", path: path, errno: .noSpace))
    #expect(!early.isOn)
  }
}
