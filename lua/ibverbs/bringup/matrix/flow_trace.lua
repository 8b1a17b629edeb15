--- fabric_matrix --trace: the hops of each flow an out end measured, found
-- by TTL-limited UDP probes of the flow's own 5-tuple (ibv.trace_flows:
-- source address and port, destination address, port 4791), so that an
-- ECMP hash sends them where it sends the flow.  A flow's hops do not
-- change between rounds: each 5-tuple is traced once a run (a pair's flows
-- keep their labels, so their ports, in the retest; --flows 1's port comes
-- from the QP numbers, new ones there).  The flows of a round are probed at
-- once.  On one segment (no router) the hops
-- are {}: the peer's kernel owns port 4791 under rxe and answers nothing.
--
--   local flow_trace = require "ibverbs.bringup.matrix.flow_trace"
--   flow_trace.run(ibv, ends, traced)   -- after a round: e.flow_figs[j].hops; traced: the run's cache
local flows = require "ibverbs.bringup.matrix.flows"

local flow_trace = {}

--- The probes: up to 8 hops, a hop asked twice (routers rate-limit their
-- ICMP) within 0.4 s each, the trace over after two silent hops in a row.
-- A round's trace takes up to max_hops x probes x timeout (6.4 s), about
-- 1.6 s on one segment (two silent hops, asked twice).
flow_trace.PROBE = { max_hops = 8, timeout_ms = 400, probes = 2, gap = 2 }

--- The most a round's traces take, seconds (fabric_matrix's time limits).
function flow_trace.limit()
  local p = flow_trace.PROBE
  return p.max_hops * p.probes * p.timeout_ms / 1000
end

-- The flows to probe in batches in which no two share a source address and port (each binds its own socket).
local function batches(want)
  local out = {}
  for _, w in ipairs(want) do
    local key = w.flow.src .. ":" .. w.flow.sport
    local placed = false
    for _, b in ipairs(out) do
      if not b.used[key] and #b.list < 1024 then
        b.used[key], b.list[#b.list + 1], b.keys[#b.keys + 1], placed = true, w.flow, w.key, true
        break
      end
    end
    if not placed then out[#out + 1] = { used = { [key] = true }, list = { w.flow }, keys = { w.key } } end
  end
  return out
end

--- Traces the flows of the out ends among ends (pair_traffic's, after their
-- round: e.flow_figs) whose 5-tuple traced (the run's cache: key -> hops,
-- or false when it could not be traced) does not hold yet, and gives every
-- such flow its hops (fig.hops; nil when it could not be traced: said on
-- stderr).  Flows without an IPv4 address (InfiniBand) are not traced.
function flow_trace.run(ibv, ends, traced, say)
  say = say or function(...) io.stderr:write(string.format(...), "\n") end
  local want, seen = {}, {}
  local function key(fig) return fig.src .. " " .. fig.dst .. " " .. fig.sport end
  for _, e in ipairs(ends) do
    for _, fig in ipairs(e.kind == "out" and e.flow_figs or {}) do
      if fig.src and fig.dst and fig.sport and traced[key(fig)] == nil and not seen[key(fig)] then
        seen[key(fig)] = true
        local f = { src = fig.src, dst = fig.dst, sport = fig.sport, dport = flows.DPORT }
        for k, v in pairs(flow_trace.PROBE) do f[k] = v end
        want[#want + 1] = { key = key(fig), flow = f }
      end
    end
  end
  for _, b in ipairs(batches(want)) do
    local res = ibv.trace_flows(b.list)
    for i, r in ipairs(res) do
      traced[b.keys[i]] = r.hops or false
      if r.error then say("fabric_matrix: cannot trace %s: %s", b.keys[i], r.error) end
    end
  end
  for _, e in ipairs(ends) do
    for _, fig in ipairs(e.kind == "out" and e.flow_figs or {}) do
      if fig.src and fig.dst and fig.sport then fig.hops = traced[key(fig)] or nil end
    end
  end
end

return flow_trace
