/// Whether two bodies are equal, and if not where they first differ. Used instead of `==` inside `#expect`,
/// whose failure message diffs the two collections: for megabytes that takes longer than any test should.
func sameBytes(_ actual: [UInt8], _ expected: [UInt8]) -> Comparison {
  if actual == expected { return Comparison(equal: true, detail: "") }
  let first =
    (0..<min(actual.count, expected.count)).first { actual[$0] != expected[$0] }
    ?? min(actual.count, expected.count)
  return Comparison(
    equal: false, detail: "\(actual.count) bytes, expected \(expected.count); first difference at \(first)")
}

struct Comparison: CustomStringConvertible {
  var equal: Bool
  var detail: String
  var description: String { detail }
}
