import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

@Suite struct KeyTests {
  @Test func objectIDIsTheSHA256OfTheKey() {
    // FIPS 180-2 test vectors.
    #expect(
      ObjectID(CacheKey("abc")).hex == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    #expect(ObjectID(CacheKey("")).hex == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    let id = ObjectID(CacheKey("abc"))
    #expect(id.bytes.count == 32)
    #expect(id.shardComponents == ("ba", "78"))
    #expect(id.description == id.hex)
  }

  @Test func pathsFollowTheShardLayout() {
    let id = ObjectID(CacheKey("abc"))
    let paths = ObjectPaths(root: "/c", id: id)
    #expect(paths.outerShard == "/c/objects/ba")
    #expect(paths.directory == "/c/objects/ba/78")
    #expect(paths.data == "/c/objects/ba/78/\(id.hex).data")
    #expect(paths.manifest == "/c/objects/ba/78/\(id.hex).manifest")
  }

  @Test func hexAndBytesRoundTripAndRejectMalformedInput() {
    let id = ObjectID(CacheKey("https://example.com/a.mp4"))
    #expect(ObjectID(hex: id.hex) == id)
    #expect(ObjectID(bytes: id.bytes) == id)
    #expect(ObjectID(hex: id.hex.uppercased()) == nil)
    #expect(ObjectID(hex: id.hex.dropLast()) == nil)
    #expect(ObjectID(hex: id.hex + "0") == nil)
    #expect(ObjectID(hex: "g" + id.hex.dropFirst()) == nil)
    #expect(ObjectID(bytes: id.bytes.dropLast()) == nil)
    #expect(ObjectID(bytes: id.bytes + [0]) == nil)
    #expect(ObjectID(hex: String(repeating: "0", count: 64))?.bytes == Array(repeating: 0, count: 32))
  }

  @Test func idsOrderByTheirBytes() {
    let low = ObjectID(bytes: [0x00] + Array(repeating: 0xFF, count: 31))!
    let high = ObjectID(bytes: [0x01] + Array(repeating: 0x00, count: 31))!
    #expect(low < high)
    #expect(!(high < low))
    #expect([high, low].sorted() == [low, high])
  }

  @Test func keysAreTheirText() {
    let key: CacheKey = "https://example.com/x"
    #expect(key == CacheKey("https://example.com/x"))
    #expect(key.description == "https://example.com/x")
    #expect(key.objectID == ObjectID(key))
    #expect(
      KeyFunction.identity.key(for: "https://example.com/x?a=1") == CacheKey("https://example.com/x?a=1"))
  }

  static let stripSigning = KeyFunction.removingQueryItems(["Expires", "signature", "KEY-PAIR-ID", "token"])

  @Test(arguments: [
    (
      "https://cdn.example.com/v/a.mp4?Expires=1700000000&quality=hd&Signature=abc%2Bdef&token=x&lang=en",
      "https://cdn.example.com/v/a.mp4?quality=hd&lang=en"
    ),
    // Names compare case-insensitively, in either direction.
    (
      "https://cdn.example.com/a.mp4?EXPIRES=1&Key-Pair-Id=K&b=2&a=1", "https://cdn.example.com/a.mp4?b=2&a=1"
    ),
    // An emptied query loses its "?"; a fragment stays.
    ("https://cdn.example.com/a.mp4?token=t&expires=2#t=10", "https://cdn.example.com/a.mp4#t=10"),
    // Repeated and valueless items that are kept stay as they were, percent-encoding included.
    ("https://x.example/p?a=1&a=2&flag&token=z&q=%20x", "https://x.example/p?a=1&a=2&flag&q=%20x"),
    // Nothing to strip, no query, not a URL: unchanged.
    ("https://x.example/p?a=1", "https://x.example/p?a=1"),
    ("https://x.example/p", "https://x.example/p"),
    ("just a key", "just a key"),
  ])
  func removingQueryItems(_ requested: String, _ expected: String) {
    #expect(Self.stripSigning.key(for: requested).rawValue == expected)
  }

  @Test func aSignedURLAndItsReSignedVersionShareAnObject() async throws {
    try await withTemporaryDirectory { directory in
      let cache = try MediaCache(
        configuration: .init(
          directory: FilePath("\(directory)/cache"), chunkSize: 4096, keyFunction: Self.stripSigning)
      )
      let first = "https://cdn.example.com/movie.mp4?Expires=1700000000&Signature=AAAA&Key-Pair-Id=K1"
      let resigned = "https://cdn.example.com/movie.mp4?Key-Pair-Id=K2&Signature=BBBB&Expires=1700003600"
      #expect(cache.objectID(for: first) == cache.objectID(for: resigned))
      #expect(cache.objectID(for: first) == ObjectID(CacheKey("https://cdn.example.com/movie.mp4")))
      #expect(
        cache.objectID(for: first) != cache.objectID(for: "https://cdn.example.com/other.mp4?Expires=1"))
      // The bytes stored under one are found under the other.
      let data = randomBytes(count: 10_000, seed: 31)
      try await cache.store(data, for: first, policy: .diskOnly)
      #expect(try await cache.data(for: resigned, policy: .diskOnly) == data)
    }
  }
}
