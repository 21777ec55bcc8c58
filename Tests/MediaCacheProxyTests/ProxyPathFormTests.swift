import Foundation
import Testing

@testable import MediaCacheProxy
@testable import MediaCacheStreaming

@Suite struct ProxyPathFormTests {
  @Test func originURLsMapToPathFormAndBack() throws {
    let cases: [(String, String)] = [
      ("https://cdn.example.com/v/a/master.mpd?token=x", "/https/cdn.example.com/v/a/master.mpd?token=x"),
      ("http://127.0.0.1:8080/a%20b/c.ts", "/http/127.0.0.1:8080/a%20b/c.ts"),
      ("HTTP://Host.Example/", "/http/Host.Example/"),
      ("http://[::1]:9/x?q=%2F&r", "/http/%5B::1%5D:9/x?q=%2F&r"),
      ("https://h.example/seg-$Number%05d$.m4s", "/https/h.example/seg-$Number%05d$.m4s"),
    ]
    for (origin, path) in cases {
      #expect(ProxyPathForm.path(for: origin) == path)
      #expect(ProxyServer.proxyPath(for: origin) == path)
      let back = ProxyServer.originURL(inRequestTarget: path)
      #expect(back == origin.replacingOccurrences(of: "HTTP://", with: "http://"), "\(path)")
    }
    // A URL with no path gets "/", a fragment is kept (the proxy never sees it: a client drops it).
    #expect(ProxyPathForm.path(for: "https://h.example") == "/https/h.example/")
    #expect(ProxyPathForm.path(for: "https://h.example/a#t=3") == "/https/h.example/a#t=3")
    // What has no path form keeps the query form.
    for origin in ["ftp://h/a", "http://user:pw@h/a", "http://h/a b.mp4", "http:///a", "http://h:99999/"] {
      #expect(ProxyPathForm.path(for: origin) == nil, "\(origin)")
      #expect(ProxyServer.proxyPath(for: origin).contains("?url="), "\(origin)")
    }
  }

  /// The HLS fuzzer (2026-11-29): a playlist line `//[::1]` was rewritten to `/https/[::1]/`; a player that
  /// percent-encodes the brackets a path may not hold (Foundation's `URLComponents` does) asked for
  /// `/https/%5B::1%5D/`, and the proxy refused its own rewritten URI. The host segment is decoded now, and an IP
  /// literal is written encoded.
  @Test func anIPLiteralsHostSegmentIsAcceptedEncodedOrNot() throws {
    for target in ["/https/%5B::1%5D/", "/https/%5b::1%5d/", "/https/[::1]/"] {
      #expect(ProxyServer.originURL(inRequestTarget: target) == "https://[::1]/", "\(target)")
    }
    #expect(
      try ProxyPathForm.originURL(path: "/http/%5B::1%5D:8080/a%20b.ts", query: "k")
        == "http://[::1]:8080/a%20b.ts?k")
    // What the rewriting gives a player, resolved the way Foundation resolves it, maps back to the origin.
    let rewritten = try #require(
      ProxyPathForm.rewrittenReference("//[::1]/v/a.ts", base: "https://h.example/p.m3u8"))
    #expect(rewritten == "/https/%5B::1%5D/v/a.ts")
    let resolved = try #require(
      URL(string: rewritten, relativeTo: URL(string: "http://127.0.0.1:9/https/h.example/p.m3u8")))
    let components = try #require(URLComponents(url: resolved.absoluteURL, resolvingAgainstBaseURL: false))
    #expect(ProxyServer.originURL(inRequestTarget: components.percentEncodedPath) == "https://[::1]/v/a.ts")
    for (path, reason) in [
      ("/http/%5B::1/a", "no ']'"), ("/http/%5/a", "bad percent-encoding"),
      ("/http/%zz::1%5D/a", "bad percent-encoding"),
      ("/http/%FF/a", "bad percent-encoding"), ("/http/%5Bzz%5D/a", "not an IPv6 literal"),
    ] {
      do {
        let origin = try ProxyPathForm.originURL(path: Substring(path), query: nil)
        Issue.record("\(path) mapped to \(origin)")
      } catch {
        #expect(error.description.contains(reason), "\(path): \(error)")
      }
    }
  }

  @Test func dotSegmentsAreRemovedUnlessTheyClimbAboveTheHost() throws {
    #expect(try ProxyPathForm.originURL(path: "/http/h/a/./b/../c.ts", query: "q") == "http://h/a/c.ts?q")
    #expect(try ProxyPathForm.originURL(path: "/http/h/a/..", query: nil) == "http://h/")
    #expect(try ProxyPathForm.originURL(path: "/https/h", query: nil) == "https://h/")
    for path in ["/http/h/../x", "/http/h/a/../../x", "/http/../h/x", "/http/./x", "/https/h/.."] {
      #expect(throws: ProxyPathFormError.self, "\(path)") {
        try ProxyPathForm.originURL(path: Substring(path), query: nil)
      }
    }
  }

  @Test func unmappableTargetsAreRefusedWithAReason() {
    let cases: [(String, String)] = [
      ("/http//a.ts", "host is empty"),
      ("/http/", "host is empty"),
      ("/http/h:http/a", "bad port"),
      ("/http/h:65536/a", "bad port"),
      ("/http/h:/a", "bad port"),
      ("/http/u:p@h/a", "userinfo"),
      ("/ftp/h/a", "unsupported scheme 'ftp'"),
      ("/http/[zz]/a", "not an IPv6 literal"),
      ("/http/h%2Fx/a", "character a host name cannot hold"),
    ]
    for (path, reason) in cases {
      do {
        let origin = try ProxyPathForm.originURL(path: Substring(path), query: nil)
        Issue.record("\(path) mapped to \(origin)")
      } catch {
        #expect(error.description.contains(reason), "\(path): \(error)")
        #expect(!error.description.contains("\n"))
      }
    }
  }

  @Test func onlyReferencesThatWouldLeaveTheProxyAreRewritten() {
    let base = "https://cdn.example.com/v/show/m.mpd?t=1"
    #expect(ProxyPathForm.rewrittenReference("seg-1.m4s", base: base) == nil)
    #expect(ProxyPathForm.rewrittenReference("../../x.m4s", base: base) == nil)
    #expect(ProxyPathForm.rewrittenReference("?t=2", base: base) == nil)
    #expect(ProxyPathForm.rewrittenReference("../../../x.m4s", base: base) == "/https/cdn.example.com/x.m4s")
    #expect(
      ProxyPathForm.rewrittenReference("/abs/x.m4s#f", base: base) == "/https/cdn.example.com/abs/x.m4s#f")
    #expect(ProxyPathForm.rewrittenReference("//o.example/x", base: base) == "/https/o.example/x")
    #expect(ProxyPathForm.rewrittenReference("http://o.example:81", base: base) == "/http/o.example:81/")
    #expect(ProxyPathForm.rewrittenReference("skd://key", base: base) == nil)
    #expect(ProxyPathForm.rewrittenReference("data:,x", base: base) == nil)
    // What HLS keeps as written in a path-form playlist: relative-path references that stay under the root.
    #expect(ProxyPathForm.keepsReference("seg-1.ts", base: base))
    #expect(ProxyPathForm.keepsReference("../../x.ts", base: base))
    #expect(!ProxyPathForm.keepsReference("../../../x.ts", base: base))
    #expect(!ProxyPathForm.keepsReference("/x.ts", base: base))
    // An absolute path whose first character is "/" with a combining mark: still an absolute path, rewritten.
    #expect(!ProxyPathForm.keepsReference("/\u{059D}\u{0441}s.-s", base: base))
    #expect(!ProxyPathForm.keepsReference("http://h/a b.ts", base: base))  // no path form: query form instead
  }

  @Test func resolutionFollowsRFC3986() {
    // RFC 3986 §5.4.1 and §5.4.2 examples.
    let base = "http://a/b/c/d;p?q"
    let examples: [(String, String)] = [
      ("g:h", "g:h"), ("g", "http://a/b/c/g"), ("./g", "http://a/b/c/g"), ("g/", "http://a/b/c/g/"),
      ("/g", "http://a/g"), ("//g", "http://g"), ("?y", "http://a/b/c/d;p?y"), ("g?y", "http://a/b/c/g?y"),
      ("#s", "http://a/b/c/d;p?q#s"), ("g#s", "http://a/b/c/g#s"), (";x", "http://a/b/c/;x"),
      ("", "http://a/b/c/d;p?q"), (".", "http://a/b/c/"), ("./", "http://a/b/c/"), ("..", "http://a/b/"),
      ("../g", "http://a/b/g"), ("../..", "http://a/"), ("../../g", "http://a/g"),
      ("../../../g", "http://a/g"),
      ("../../../../g", "http://a/g"), ("/./g", "http://a/g"), ("/../g", "http://a/g"),
      ("g.", "http://a/b/c/g."),
      (".g", "http://a/b/c/.g"), ("g..", "http://a/b/c/g.."), ("./../g", "http://a/b/g"),
      ("./g/.", "http://a/b/c/g/"), ("g/./h", "http://a/b/c/g/h"), ("g/../h", "http://a/b/c/h"),
      ("g;x=1/./y", "http://a/b/c/g;x=1/y"), ("g;x=1/../y", "http://a/b/c/y"),
      ("g?y/./x", "http://a/b/c/g?y/./x"),
      ("g#s/../x", "http://a/b/c/g#s/../x"), ("http:g", "http:g"),
    ]
    for (reference, expected) in examples {
      #expect(URIReference.resolve(reference, against: base) == expected, "\(reference)")
    }
  }

  /// A "/" followed by a combining mark is one `Character` that is not "/" (Swift compares characters), but
  /// in a URI it is a slash like any: every delimiter is found by bytes. Each expectation failed when the
  /// code compared characters.
  @Test func slashesFollowedByCombiningMarksAreSlashes() throws {
    let mark = "\u{0301}"
    let base = "http://a/b/c\(mark)/d"
    // An absolute path, not a relative one merged with the base's directory.
    #expect(URIReference.resolve("/\(mark)x", against: base) == "http://a/\(mark)x")
    // The base's directory ends at its last slash byte ("c" + "/" + mark would otherwise hide it).
    #expect(URIReference.resolve("y", against: "http://a/b/c/\(mark)d") == "http://a/b/c/y")
    // Segments are cut at every slash byte.
    #expect(URIReference.removeDotSegments("/a/\(mark)b/../c"[...]).path == "/a/c")
    // Path form: the authority ends at the first slash byte.
    #expect(ProxyPathForm.isPathForm("/https/\(mark)h/x"))
    #expect(try ProxyPathForm.originURL(path: "/https/h/\(mark)/../x", query: nil) == "https://h/x")
    // Template identifiers are found by bytes.
    #expect(ProxyPathForm.templateIdentifiers("a$\(mark)Number$b"[...]) == ["$\(mark)Number$"])
    let (path, query) = "p?\(mark)q"[...].splitOnce(at: "?")
    #expect(path == "p" && query == "\(mark)q")
  }
}
