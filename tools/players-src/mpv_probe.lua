-- Prints one line at exit for tools/players: the duration and the first and last playback positions mpv saw,
-- and the reason playback ended if it was an error.
local first, last, duration, failure = nil, nil, nil, ""
mp.observe_property("time-pos", "number", function(_, value)
  if value ~= nil then
    if first == nil then first = value end
    last = value
  end
end)
mp.observe_property("duration", "number", function(_, value)
  if value ~= nil then duration = value end
end)
mp.register_event("end-file", function(event)
  if event.reason == "error" then failure = event.error or "error" end
end)
mp.register_event("shutdown", function()
  io.write(string.format("MCPROBE duration=%s first=%s last=%s error=%s", tostring(duration), tostring(first),
    tostring(last), failure) .. "\n")
  io.stdout:flush()
end)
