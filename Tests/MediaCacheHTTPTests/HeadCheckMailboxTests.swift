import Foundation
import NIOCore
import Synchronization
import Testing

@testable import MediaCacheHTTP

/// `HeadCheckMailbox`: body parts offered while a response's head is checked go to the head's job, in order;
/// once the job has closed it, parts are refused (the writer queues them for its next job). No part is both
/// taken and refused, and none is lost.
@Suite struct HeadCheckMailboxTests {
  @Test func partsOfferedBeforeTheCloseAreTakenInOrderAndLaterOnesRefused() {
    let mailbox = HeadCheckMailbox()
    #expect(mailbox.offer(ByteBuffer(bytes: [1, 2])))
    #expect(mailbox.offer(ByteBuffer(bytes: [3])))
    let taken = mailbox.close()
    #expect(taken.map { Array($0.readableBytesView) } == [[1, 2], [3]])
    #expect(!mailbox.offer(ByteBuffer(bytes: [4])))
    // Closed once, it stays closed and holds nothing (a refused part is not kept either).
    #expect(mailbox.close().isEmpty)
  }

  @Test func aMailboxClosedWithNothingOfferedGivesNothing() {
    let mailbox = HeadCheckMailbox()
    #expect(mailbox.close().isEmpty)
    #expect(!mailbox.offer(ByteBuffer(bytes: [1])))
  }

  /// One thread offers numbered parts while another closes at a random moment: the parts taken are a prefix
  /// of those offered, and every part after it was refused.
  @Test func underAConcurrentCloseEveryPartIsTakenOrRefusedExactlyOnce() async {
    for round in 0..<200 {
      let mailbox = HeadCheckMailbox()
      let refused = Mutex<[UInt8]>([])
      let offering = Thread {
        for index in 0..<100 {
          let part = ByteBuffer(bytes: [UInt8(index)])
          if !mailbox.offer(part) { refused.withLock { $0.append(UInt8(index)) } }
        }
      }
      let start = Date()
      offering.start()
      // Close after a few microseconds, somewhere in the middle of the offers (or before or after them).
      while Date().timeIntervalSince(start) < Double(round % 20) * 1e-6 {}
      let taken = mailbox.close().flatMap { Array($0.readableBytesView) }
      while !offering.isFinished { await Task.yield() }
      let all = taken + refused.withLock { $0 }
      #expect(all == (0..<100).map { UInt8($0) }, "round \(round): taken \(taken.count)")
    }
  }
}
