import Foundation

/// The rules for an object's group name (`Manifest.group`): 1 to `Manifest.maxGroupBytes` bytes of UTF-8
/// without control characters. Names are compared byte for byte; the index keys a group by the SHA-256 of its
/// name, so any such name is safe on disk.
package enum GroupName {
  /// `name` if it is a valid group name; else `StoreError.invalidGroup` (empty, a control character) or
  /// `StoreError.fieldTooLarge` (over `Manifest.maxGroupBytes`).
  @discardableResult
  package static func validated(_ name: String) throws -> String {
    let size = name.utf8.count
    guard size > 0 else { throw StoreError.invalidGroup(name, reason: "a group name cannot be empty") }
    guard size <= Manifest.maxGroupBytes else {
      throw StoreError.fieldTooLarge(field: "group", size: size, limit: Manifest.maxGroupBytes)
    }
    if let scalar = name.unicodeScalars.first(where: { $0.properties.generalCategory == .control }) {
      throw StoreError.invalidGroup(
        name, reason: "control character U+\(String(scalar.value, radix: 16, uppercase: true)) in the name")
    }
    return name
  }
}
