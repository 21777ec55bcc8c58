import Foundation
import Testing

/// Overwrites the byte at `offset` of the file at `path` with its complement (through `FileHandle`, no append).
func flipByte(atPath path: String, offset: Int64) throws {
  let handle = try #require(FileHandle(forUpdatingAtPath: path))
  defer { try? handle.close() }
  try handle.seek(toOffset: UInt64(offset))
  let old = try #require(try handle.read(upToCount: 1)?.first)
  try handle.seek(toOffset: UInt64(offset))
  try handle.write(contentsOf: [~old])
}

/// The whole contents of the file at `path`.
func fileBytes(_ path: String) throws -> Data {
  try Data(contentsOf: URL(fileURLWithPath: path))
}

/// The permission bits of the file or directory at `path`.
func permissions(_ path: String) throws -> Int {
  let attributes = try FileManager.default.attributesOfItem(atPath: path)
  let mode = try #require(attributes[.posixPermissions] as? NSNumber)
  return mode.intValue & 0o777
}
