-- wrk script of tools/bench's `tier` case: the requests walk a list of paths (a seeded Zipf stream, one path
-- per line of FILE), each thread from its own offset, round and round. wrk counts responses that are not 2xx or
-- 3xx; tools/bench fails the case when there is one.
--
--   wrk -s tier-paths.lua URL -- FILE

local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("index", counter)
end

function init(args)
  paths = {}
  for line in io.lines(args[1]) do paths[#paths + 1] = line end
  position = (index * 7919) % #paths
end

function request()
  position = position % #paths + 1
  return wrk.format("GET", paths[position])
end

function done(summary, latency, requests)
  local failed = summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write
    + summary.errors.timeout
  io.write(string.format("tier-paths: %d requests in %.3f s, %d errors, p50 %.3f ms, p99 %.3f ms\n",
    summary.requests, summary.duration / 1e6, failed, latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
