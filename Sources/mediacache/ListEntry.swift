import MediaCache

/// One object of `mediacache ls`. Every key is present: an object whose manifest is missing or cannot be read
/// has `state` `none` or `unreadable`, an `error`, and null for what only the manifest tells.
struct ListEntry: Codable, Equatable {
  var objectID: ObjectID
  /// `none`, `partial`, `complete`, or `unreadable`.
  var state: String
  var cachedBytes: Int64?
  var length: Int64?
  var pinned: Bool?
  var diskBytes: Int64?
  /// Why the object could not be read; null for a readable one.
  var error: String?

  func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(objectID, forKey: .objectID)
    try container.encode(state, forKey: .state)
    try container.encode(cachedBytes, forKey: .cachedBytes)
    try container.encode(length, forKey: .length)
    try container.encode(pinned, forKey: .pinned)
    try container.encode(diskBytes, forKey: .diskBytes)
    try container.encode(error, forKey: .error)
  }
}
