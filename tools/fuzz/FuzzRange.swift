// libFuzzer target for the proxy's `Range` header parser (`RangeHeader`, RFC 9110 §14.2) and the resolution of
// the parsed range against an object length (`RequestedRange.resolved(length:)`, §14.1.2). Built and run by
// `tools/fuzz/run range`; see tools/fuzz/README.md.
//
// The input is the header value, decoded as UTF-8 the way the HTTP layer hands it over (invalid sequences
// become U+FFFD). For every input:
//   1. `RangeHeader` agrees with a small byte-level reference parser of the grammar the proxy accepts
//      (`bytes=` in any case, then comma-separated `a-b`, `a-` or `-n` of 1 to 18 ASCII digits with a <= b,
//      spaces and tabs around the value and each spec; anything else, an empty spec included, is ignored):
//      same classification (none, single, multiple) and, for a single range, the same numbers;
//   2. a parsed range is well-formed: never `.all`, a bounded range is non-empty with 0 <= first <= last, and
//      it renders back to a canonical header (`bytes=a-b`, `bytes=a-`, `bytes=-n`) that parses to the same
//      range, in any letter case and with spaces or tabs around it;
//   3. resolved against lengths around its own numbers (and 0, 1, Int64.max), it gives exactly what RFC 9110
//      §14.1.2 says: nil when unsatisfiable, else a non-empty range inside 0..<length;
//   4. the size limit holds: padding the value with spaces to exactly `RangeHeader.maxLength` UTF-8 bytes
//      changes nothing, one byte more makes the header ignored (`.none`).
// A violated property ends in `fatalError`, which libFuzzer reports as a crash and saves the input.

import MediaCache

/// libFuzzer's entry point: runs one input (`size` bytes at `data`) and returns 0; a violated property traps.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
  let value = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
  let header = RangeHeader(value)

  // 1. The reference parser.
  let expected = referenceShape(value)
  guard Shape(header) == expected else {
    fatalError("RangeHeader(\(value.debugDescription)) = \(header), the reference says \(expected)")
  }

  // 2 and 3. A single range.
  if case .single(let range) = header { checkParsed(range, from: value) }

  // 4. The size limit.
  let count = value.utf8.count
  if count <= RangeHeader.maxLength {
    let padded = value + String(repeating: " ", count: RangeHeader.maxLength - count)
    guard RangeHeader(padded) == header else {
      fatalError("padding \(value.debugDescription) with spaces to the limit changed \(header)")
    }
  }
  let over = value + String(repeating: " ", count: max(0, RangeHeader.maxLength + 1 - count))
  guard RangeHeader(over) == .none else {
    fatalError("a header of \(over.utf8.count) bytes (over the limit) was not ignored: \(RangeHeader(over))")
  }
  return 0
}

/// The properties of a range `RangeHeader` parsed out of `value`.
func checkParsed(_ range: RequestedRange, from value: String) {
  let canonical: String
  var bounds: [Int64] = []
  switch range {
  case .all:
    fatalError("\(value.debugDescription) parsed to .all, which only means 'no Range header'")
  case .bounded(let bytes):
    guard bytes.lowerBound >= 0, bytes.upperBound > bytes.lowerBound else {
      fatalError("\(value.debugDescription) parsed to the empty or negative range \(bytes)")
    }
    canonical = "\(bytes.lowerBound)-\(bytes.upperBound - 1)"
    bounds = [bytes.lowerBound, bytes.upperBound]
  case .from(let first):
    guard first >= 0 else { fatalError("\(value.debugDescription) parsed to .from(\(first))") }
    canonical = "\(first)-"
    bounds = [first]
  case .suffix(let count):
    guard count >= 0 else { fatalError("\(value.debugDescription) parsed to .suffix(\(count))") }
    canonical = "-\(count)"
    bounds = [count]
  }
  for rendered in ["bytes=\(canonical)", "BYTES=\(canonical)", " \tBytes=\(canonical)\t "] {
    guard RangeHeader(rendered) == .single(range) else {
      fatalError("\(range) rendered as \(rendered.debugDescription) parses to \(RangeHeader(rendered))")
    }
  }

  var lengths: Set<Int64> = [0, 1, 2, Int64.max - 1, Int64.max]
  for bound in bounds {
    for delta: Int64 in -2...2 where bound.addingReportingOverflow(delta).overflow == false {
      let length = bound + delta
      if length >= 0 { lengths.insert(length) }
    }
  }
  for length in lengths { checkResolved(range, length: length, header: value) }
}

/// `range.resolved(length:)` against RFC 9110 §14.1.2.
func checkResolved(_ range: RequestedRange, length: Int64, header: String) {
  let got = range.resolved(length: length)
  let want: Range<Int64>?
  switch range {
  case .all: want = 0..<length
  case .bounded(let bytes):
    // first-pos-last-pos: satisfiable iff first-pos < length; last-pos past the end means the end.
    let last = bytes.upperBound - 1
    want = bytes.lowerBound < length ? bytes.lowerBound..<(min(last, length - 1) + 1) : nil
  case .from(let first):
    want = first < length ? first..<length : nil
  case .suffix(let count):
    // A suffix longer than the representation means all of it; a suffix of 0 bytes, or of an empty
    // representation, is unsatisfiable.
    want = count > 0 && length > 0 ? (length - min(count, length))..<length : nil
  }
  guard got == want else {
    fatalError(
      "\(range) (from \(header.debugDescription)) resolved against \(length) gives \(String(describing: got)),"
        + " RFC 9110 says \(String(describing: want))")
  }
  if let got {
    guard got.lowerBound >= 0, got.lowerBound < got.upperBound, got.upperBound <= length else {
      fatalError("\(range) resolved against \(length) is out of bounds: \(got)")
    }
  }
}

// MARK: - Reference parser

/// What a `Range` header means to the proxy, without the numbers' types: ignored, one range (`first`/`last`
/// as written, nil when absent), or several.
enum Shape: Equatable, CustomStringConvertible {
  case none
  case single(first: Int64?, last: Int64?)
  case multiple

  init(_ header: RangeHeader) {
    switch header {
    case .none: self = .none
    case .multiple: self = .multiple
    case .single(.all): self = .single(first: -1, last: -1)  // never equal to a reference result
    case .single(.bounded(let bytes)): self = .single(first: bytes.lowerBound, last: bytes.upperBound - 1)
    case .single(.from(let first)): self = .single(first: first, last: nil)
    case .single(.suffix(let count)): self = .single(first: nil, last: count)
    }
  }

  var description: String {
    switch self {
    case .none: "none"
    case .multiple: "multiple"
    case .single(let first, let last):
      "single(\(first.map { "\($0)" } ?? "")-\(last.map { "\($0)" } ?? ""))"
    }
  }
}

/// The grammar `RangeHeader` implements, written independently over bytes.
func referenceShape(_ value: String) -> Shape {
  let bytes = Array(value.utf8)
  guard bytes.count <= RangeHeader.maxLength else { return .none }
  let body = trimmed(bytes[...])
  let unit = Array("bytes=".utf8)
  guard body.count >= unit.count,
    zip(body.prefix(unit.count), unit).allSatisfy({ lowercased($0) == $1 })
  else { return .none }
  var specs: [(Int64?, Int64?)] = []
  for raw in body.dropFirst(unit.count).split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false)
  {
    let spec = trimmed(raw)
    guard let dash = spec.firstIndex(of: UInt8(ascii: "-")) else { return .none }
    let first = spec[..<dash]
    let last = spec[(dash + 1)...]
    if first.isEmpty {
      guard let count = digits(last) else { return .none }
      specs.append((nil, count))
    } else {
      guard let start = digits(first) else { return .none }
      if last.isEmpty {
        specs.append((start, nil))
      } else {
        guard let end = digits(last), start <= end else { return .none }
        specs.append((start, end))
      }
    }
  }
  switch specs.count {
  case 0: return .none
  case 1: return .single(first: specs[0].0, last: specs[0].1)
  default: return .multiple
  }
}

private func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
  func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }
  var slice = bytes
  while let first = slice.first, isSpace(first) { slice = slice.dropFirst() }
  while let last = slice.last, isSpace(last) { slice = slice.dropLast() }
  return slice
}

private func lowercased(_ byte: UInt8) -> UInt8 { byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte }

/// 1 to 18 ASCII digits (the most the proxy reads; more is ignored rather than risking overflow).
private func digits(_ bytes: ArraySlice<UInt8>) -> Int64? {
  guard (1...18).contains(bytes.count), bytes.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
  return bytes.reduce(0) { $0 * 10 + Int64($1 - 0x30) }
}
