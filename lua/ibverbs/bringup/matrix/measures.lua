--- What fabric_matrix.lua measures, and the text each measurement goes by:
-- the one table the pair traffic (a failure's phase), the diagnosis (a flag's
-- why) and the report (a matrix's heading) all read; and the quantile their
-- references are taken at.
--
--   local measures = require "ibverbs.bringup.matrix.measures"
--   measures.METRICS[1].title, measures.phase("rx")   -- "ping-pong latency", "send bandwidth (receiving)"
local measures = {}

--- The figures of a pair: key in a pair's record, name in a flag's why, title
-- in the report, unit, whether higher is better, the report's format.
measures.METRICS = {
  { key = "lat_us", name = "latency", title = "ping-pong latency", unit = "us", higher = false, fmt = "%.1f" },
  { key = "write_mbs", name = "RDMA write bandwidth", title = "RDMA write bandwidth", unit = "MB/s", higher = true,
    fmt = "%.2f" },
  { key = "send_mbs", name = "send bandwidth", title = "send bandwidth", unit = "MB/s", higher = true, fmt = "%.2f" },
}

--- The phases of a pair's end (lua/ibverbs/bringup/matrix/pair_traffic.lua), each with what it is doing.
measures.PHASES = {
  lat = "ping-pong",
  rx = "send bandwidth (receiving)",
  write = "RDMA write bandwidth",
  send = "send bandwidth",
}

--- The text of a phase (its name when it has none).
function measures.phase(state) return measures.PHASES[state] or tostring(state) end

--- The q-quantile of the sorted list l, interpolated between its neighbours
-- (q = 0.5 is the median, 1 the highest, 0 the lowest): the references of
-- the figures (diagnose.lua) and of the counters' rates (counter_judge.lua).
function measures.quantile(l, q)
  local h = (#l - 1) * q + 1
  local i = math.floor(h)
  if i >= #l then return l[#l] end
  return l[i] + (h - i) * (l[i + 1] - l[i])
end

return measures
