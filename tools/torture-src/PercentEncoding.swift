import Foundation

/// Percent-encodes everything but RFC 3986 unreserved characters.
func percentEncode(_ text: String) -> String {
  var out = ""
  for byte in text.utf8 {
    switch byte {
    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
      UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
      UInt8(ascii: "~"):
      out.unicodeScalars.append(Unicode.Scalar(byte))
    default:
      out += String(format: "%%%02X", byte)
    }
  }
  return out
}
