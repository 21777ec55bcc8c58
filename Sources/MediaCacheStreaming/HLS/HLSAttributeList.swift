import Foundation

extension HLSPlaylist {
  // MARK: Attribute lists

  /// One `NAME=VALUE` of an attribute list; for a quoted string, `value` is the text between the quotes.
  struct Attribute: Equatable {
    var name: Substring
    var value: Substring
    var isQuoted: Bool
  }

  /// Why an attribute list could not be parsed.
  struct AttributeListError: Error, Equatable {
    var reason: String
  }

  /// Parses an attribute list (RFC 8216 §4.2): comma-separated `NAME=VALUE`, where a value is a quoted string
  /// (which may hold commas, never `"`, CR or LF) or runs to the next comma. Spaces around attributes and a
  /// trailing comma are tolerated; a missing `=`, an empty name or value, an unterminated quoted string or a
  /// repeated name is an error. The values are slices of `text`.
  static func parseAttributeList(_ text: Substring) throws(AttributeListError) -> [Attribute] {
    var attributes: [Attribute] = []
    var names = Set<Substring>()  // a playlist line can hold megabytes of attributes: no pairwise comparison
    let scalars = text.unicodeScalars
    var index = scalars.startIndex
    func skipSpaces() {
      while index < scalars.endIndex, scalars[index] == " " || scalars[index] == "\t" {
        scalars.formIndex(after: &index)
      }
    }
    func isNameScalar(_ scalar: Unicode.Scalar) -> Bool {
      switch scalar {
      case "A"..."Z", "a"..."z", "0"..."9", "-", "_": true
      default: false
      }
    }
    while true {
      skipSpaces()
      if index == scalars.endIndex { break }
      let nameStart = index
      while index < scalars.endIndex, isNameScalar(scalars[index]) { scalars.formIndex(after: &index) }
      let name = text[nameStart..<index]
      guard !name.isEmpty else {
        throw AttributeListError(
          reason: "expected an attribute name at '\(text[nameStart...].prefix(20))'")
      }
      guard index < scalars.endIndex, scalars[index] == "=" else {
        throw AttributeListError(reason: "attribute \(name) has no '='")
      }
      scalars.formIndex(after: &index)
      let attribute: Attribute
      if index < scalars.endIndex, scalars[index] == "\"" {
        scalars.formIndex(after: &index)
        let valueStart = index
        while index < scalars.endIndex, scalars[index] != "\"" { scalars.formIndex(after: &index) }
        guard index < scalars.endIndex else {
          throw AttributeListError(reason: "the quoted value of \(name) has no closing '\"'")
        }
        attribute = Attribute(name: name, value: text[valueStart..<index], isQuoted: true)
        scalars.formIndex(after: &index)
      } else {
        let valueStart = index
        while index < scalars.endIndex, scalars[index] != "," { scalars.formIndex(after: &index) }
        var value = text[valueStart..<index]
        while let last = value.unicodeScalars.last, last == " " || last == "\t" {
          value = value[value.startIndex..<value.unicodeScalars.index(before: value.endIndex)]
        }
        guard !value.isEmpty else { throw AttributeListError(reason: "attribute \(name) has an empty value") }
        attribute = Attribute(name: name, value: value, isQuoted: false)
      }
      guard names.insert(name).inserted else {
        throw AttributeListError(reason: "attribute \(name) appears twice")
      }
      attributes.append(attribute)
      skipSpaces()
      if index == scalars.endIndex { break }
      guard scalars[index] == "," else {
        throw AttributeListError(
          reason: "unexpected '\(text[index...].prefix(20))' after the value of \(name) (expected ',')")
      }
      scalars.formIndex(after: &index)
    }
    return attributes
  }
}

extension [HLSPlaylist.Attribute] {
  /// The value of the attribute named `name`, if present.
  func value(_ name: String) -> Substring? { first { $0.name == name }?.value }
}

extension Substring {
  func trimmingSuffix() -> Substring {
    var result = self
    while let last = result.unicodeScalars.last, last == " " || last == "\t" {
      result = result[result.startIndex..<result.unicodeScalars.index(before: result.endIndex)]
    }
    return result
  }
}
