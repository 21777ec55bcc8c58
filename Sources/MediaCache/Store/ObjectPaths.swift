/// Where one object's files live under a cache root.
package struct ObjectPaths: Sendable, Equatable {
  /// `<root>/objects/ab`.
  package let outerShard: String
  /// `<root>/objects/ab/cd`.
  package let directory: String
  /// `<root>/objects/ab/cd/<hex>.data`.
  package let data: String
  /// `<root>/objects/ab/cd/<hex>.manifest`.
  package let manifest: String

  init(root: String, id: ObjectID) {
    let (first, second) = id.shardComponents
    outerShard = "\(root)/objects/\(first)"
    directory = "\(outerShard)/\(second)"
    data = "\(directory)/\(id.hex).data"
    manifest = "\(directory)/\(id.hex).manifest"
  }
}
