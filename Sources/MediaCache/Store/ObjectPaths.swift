/// Where one object's files live under a cache root.
public struct ObjectPaths: Sendable, Equatable {
  /// `<root>/objects/ab`.
  public let outerShard: String
  /// `<root>/objects/ab/cd`.
  public let directory: String
  /// `<root>/objects/ab/cd/<hex>.data`.
  public let data: String
  /// `<root>/objects/ab/cd/<hex>.manifest`.
  public let manifest: String

  init(root: String, id: ObjectID) {
    let (first, second) = id.shardComponents
    outerShard = "\(root)/objects/\(first)"
    directory = "\(outerShard)/\(second)"
    data = "\(directory)/\(id.hex).data"
    manifest = "\(directory)/\(id.hex).manifest"
  }
}
