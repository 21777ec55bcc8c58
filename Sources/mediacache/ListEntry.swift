import MediaCache

/// One object of `mediacache ls`. Every key is present: an object whose manifest is missing or cannot be read
/// has `state` `none` or `unreadable`, an `error`, and null for what only the manifest tells.
struct ListEntry: Codable, Equatable {
  var objectID: ObjectID
  /// `none`, `partial`, `complete`, or `unreadable`.
  var state: String
  @NullWhenAbsent var cachedBytes: Int64? = nil
  @NullWhenAbsent var length: Int64? = nil
  @NullWhenAbsent var pinned: Bool? = nil
  @NullWhenAbsent var diskBytes: Int64? = nil
  /// The object's group; null when it has none (or its manifest cannot be read).
  @NullWhenAbsent var group: String? = nil
  /// Why the object could not be read; null for a readable one.
  @NullWhenAbsent var error: String? = nil
}
