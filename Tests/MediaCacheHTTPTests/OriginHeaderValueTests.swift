import MediaCacheHTTP
import Testing

/// How a configured origin header's value is kept: HTTP's optional whitespace (space and tab bytes, RFC 9110
/// §5.6.3) is dropped at both ends, and nothing else.
@Suite struct OriginHeaderValueTests {
  @Test func spacesAndTabsAtTheEndsAreDroppedAndInnerOnesKept() throws {
    #expect(try OriginHeader(name: "Authorization", value: " \t Bearer a b \t ").value == "Bearer a b")
    #expect(try OriginHeader(name: "X-Empty", value: " \t ").value == "")
    #expect(try OriginHeader(name: "X-Plain", value: "v").value == "v")
  }

  /// A space before a combining mark is whitespace by its bytes, though Swift counts the two as one character:
  /// it is dropped, and the mark kept (before 2026-12-06 the trim went by characters and kept both).
  @Test func theTrimGoesByBytesNotCharacters() throws {
    #expect(try OriginHeader(name: "X-Mark", value: " \u{301}x ").value == "\u{301}x")
  }

  /// The length bound applies to the value once trimmed.
  @Test func theBoundIsOnTheTrimmedValue() throws {
    let longest = String(repeating: "a", count: OriginHeader.maxValueBytes)
    #expect(try OriginHeader(name: "X-Long", value: "  \(longest)\t").value == longest)
    #expect(throws: OriginError.self) { try OriginHeader(name: "X-Long", value: longest + "a") }
  }
}
