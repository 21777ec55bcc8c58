import Foundation

// TEMPORARY stand-in so the proxy compiles until the real rewriter lands (branch `cli`).
public enum HLSError: Error, Sendable, Equatable { case notAPlaylist }
public enum HLSPlaylist {
  public static let maxPlaylistBytes = 8 << 20
  public static func isPlaylist(contentType: String?, url: String, prefix: some Collection<UInt8>) -> Bool {
    false
  }
  public static func rewrite(_ text: String, playlistURL: URL, transform: (URL) -> String) throws(HLSError)
    -> String
  { text }
}
