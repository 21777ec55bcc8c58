import Foundation
import MediaCacheTestSupport
import Synchronization
import SystemPackage
import Testing

@testable import MediaCache

extension FaultTests {
  /// A new object's data file, opened with `deferringCreation`, is made by its first user and given the length
  /// recorded before it (`ObjectDataFile.setSize`). When that sizing fails, the use fails with the error, the
  /// file made is closed (its lock released) and the next use opens it and sizes it: nothing is written to a
  /// file of the wrong size, and nothing else is lost.
  @Suite struct DeferredSizing {
    /// Fails the first `ftruncate` of a file of the object whose hex id it is given, with EIO.
    final class FirstTruncateFails: IOFaultHandler {
      let hex: String
      private let failed = Atomic<Bool>(false)
      init(hex: String) { self.hex = hex }
      var hasFailed: Bool { failed.load(ordering: .relaxed) }

      func before(_ event: IOEvent) throws(Errno) -> (any Sendable)? {
        if event.operation == .truncate, event.path.contains(hex),
          !failed.exchange(true, ordering: .relaxed)
        {
          throw .ioError
        }
        return nil
      }

      func after(_ event: IOEvent, context: (any Sendable)?, error: Errno?) {}
    }

    @Test func aFailedSizingOfTheNewFileFailsItsUseAndTheNextUseSizesIt() async throws {
      try await withStore { store in
        let id = CacheKey("https://sizing.example/video.mp4").objectID
        let path = store.paths(for: id).data
        let length = Int64(2 * store.chunkSize + 10)
        let handler = FirstTruncateFails(hex: id.hex)
        try await withIOFaultHandler(handler) {
          let manager = try FileHandleAssetDataManager(store: store, id: id, deferringCreation: true)
          try manager.setContentLength(length)
          #expect(try FileSystemCalls.fileType(path) == nil, "recording the length made no file")
          let bytes = randomBytes(count: 4096, seed: 41)
          #expect {
            try manager.write(bytes, at: 0)
          } throws: { error in
            guard let error = error as? StoreError else { return false }
            return error.code == .io && error.errno == .ioError
          }
          #expect(handler.hasFailed)
          // The file was made and linked, then closed unsized: not written, and not held (a child process
          // forked meanwhile by another suite may hold its lock until its `exec`: looked at again a while).
          let made = try #require(try FileSystemCalls.status(path))
          #expect(made.size == 0)
          var held = try store.isBusy(id)
          for _ in 0..<100 where held {
            try await Task.sleep(for: .milliseconds(10))
            held = try store.isBusy(id)
          }
          #expect(!held)
          // The next use opens that file (the same inode), sizes it and writes.
          try manager.write(bytes, at: 0)
          let sized = try #require(try FileSystemCalls.status(path))
          #expect(sized.inode == made.inode)
          #expect(sized.size == length)
          #expect(try store.isBusy(id))
          #expect(try manager.read(0..<4096) == bytes)
          try manager.close()
          #expect(try store.readManifest(id)?.contentLength == length)
          let reader = try FileHandleAssetDataManager(store: store, id: id, writable: false)
          #expect(try reader.read(0..<4096) == bytes)
          try reader.close()
        }
      }
    }
  }
}
