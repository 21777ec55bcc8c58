-- wrk script of tools/bench's `serve` case: every request asks for one random range of LENGTH bytes of an
-- object of SIZE bytes, at any byte offset (not aligned to chunks), from a generator seeded per thread so
-- rounds are repeatable. wrk counts the responses that are not 2xx or 3xx; tools/bench fails the case when
-- there is one, and checks the bytes of a few ranges with curl and cmp (a response callback here would copy
-- every body into Lua, costing the client CPU it shares with the servers).
--
--   wrk -s serve-ranges.lua URL -- SIZE LENGTH [SEED]

local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("index", counter)
end

function init(args)
  size = tonumber(args[1])
  length = tonumber(args[2])
  math.randomseed((tonumber(args[3]) or 1) * 1000 + index)
end

function request()
  local first = math.random(0, size - length)
  return wrk.format("GET", nil, { ["Range"] = "bytes=" .. first .. "-" .. (first + length - 1) })
end

function done(summary, latency, requests)
  local failed = summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write
    + summary.errors.timeout
  io.write(string.format("serve-ranges: %d requests in %.3f s, %d errors, p50 %.3f ms, p99 %.3f ms\n",
    summary.requests, summary.duration / 1e6, failed, latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
