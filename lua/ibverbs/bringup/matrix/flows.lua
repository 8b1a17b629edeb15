--- fabric_matrix's flows (--flows N): a measured pair and rail spread over N
-- RC QPs, each with a GRH flow label of its own, so that its RoCE v2 UDP
-- source port is known (ibv.roce_udp_sport: the label folded into 0xc000 to
-- 0xffff) and, through an ECMP hash of the 5-tuple, its path may differ from
-- its siblings'.  Pure functions: the labels, the stalls of a flow's samples,
-- the line a flow travels to rank 0 in, its record (the diagnosis reads a
-- list of them: fabric_matrix's make_report), and whether a pair's flows
-- stand out.
--
--   local flows = require "ibverbs.bringup.matrix.flows"
--   local labels = flows.labels(src, dst, rail, n)         -- n distinct labels, 1 to 0x3fff, the same on both ends
--   local line = flows.line(rail, peer, j, fig)            -- "L rail peer j ..." (results.lua's lines)
--   local rec = flows.parse(line, hosts)                   -- the flow record
--
-- How many: with k equal-cost paths between two leaves and N flows hashed
-- onto them at random, P(some path carries none of the N) <= k (1 - 1/k)^N.
-- The default, 8: k = 2 (two spines, or two uplinks) is covered but for
-- 2 (1/2)^8 = 0.8 %; k = 3 but for at most 3 (2/3)^8 = 12 %; k = 4 in 62 %
-- of pairs (exactly: 1 - 4 (3/4)^8 + 6 (1/2)^8 - 4 (1/4)^8).  Wider
-- fan-outs are covered across pairs, not within one: a leaf's uplink to one
-- of k spines carries about N P / k of the flows of the P pairs through that
-- leaf (k = 16, P = 32: 16 flows a link).  --flows 16 covers k = 4 but for
-- 4 (3/4)^16 = 4 %.  A pair's ping-pong samples and bandwidth messages are
-- split among its flows, not multiplied: a round costs about what it did
-- (the QPs N times over).
--
-- Stalls: a lost frame costs an RC connection one ack timeout (--qp-timeout:
-- 67 ms at 14) before it is sent again, a thousand times and more a healthy
-- round trip on hardware (a few us); a sample over STALL_FACTOR (100) times
-- its flow's median is one, or over half the ack timeout whatever the median
-- (a slow emulated link, whose median is ms: a loss still counts).  100
-- leaves out the jitter of a busy host (interrupts, a preempted poller:
-- tens of us on hardware), so stalls / samples estimates the flow's loss.
local flows = {}

flows.DEFAULT = 1 -- (one QP a pair and rail, as before flows: ask for more where paths matter)
flows.ECMP = 8 -- what a fabric of two or four equal paths needs (docs/bringup.md, Flows and their paths)
flows.MAX = 16 -- 3 x 16 bandwidth kernels of a rail in one ibv.kernels call (64 at most)
flows.MIN_LAT = 8 -- round trips a flow at least: a median of 7 samples
flows.MIN_BW = 8 -- bandwidth messages a flow at least: one chain of pair_traffic's (its CHAIN)
flows.STALL_FACTOR = 100
flows.DPORT = 4791 -- RoCE v2's UDP destination port
local LABELS = 0x3fff -- labels 1 to 0x3fff: each its own source port, 0xc000 + label

--- The flow labels of the n flows of src -> dst on rail: distinct, from 1 to
-- 0x3fff (each its own UDP source port, 0xc000 + label), spread evenly over
-- them and turned by the pair and rail, so that pairs do not all use the same
-- ports; the same on both ends of the pair.  One flow (--flows 1) keeps label
-- 0: the provider derives the port from both QP numbers, as without flows.
function flows.labels(src, dst, rail, n)
  if n == 1 then return { 0 } end
  local base = (src * 7919 + dst * 104729 + rail * 1299709) % LABELS
  local step = math.floor(LABELS / n)
  local l = {}
  for j = 1, n do l[j] = 1 + (base + (j - 1) * step) % LABELS end
  return l
end

--- The flows a run has: asked for (--flows), but no more than give each
-- flow MIN_LAT of the lat_iters round trips (-n) and MIN_BW of the bw_iters
-- messages (-N), so that the flows split a pair's traffic, never multiply
-- it (-n 10 -N 8: one flow, the traffic as without flows).
function flows.effective(asked, lat_iters, bw_iters)
  return math.max(1, math.min(asked, math.floor(lat_iters / flows.MIN_LAT), math.floor(bw_iters / flows.MIN_BW)))
end

--- The IPv4 address of an IPv4-mapped GID ("::ffff:10.0.1.11"), or nil (InfiniBand, IPv6).
function flows.ipv4(gid)
  return gid and gid:match("^::ffff:(%d+%.%d+%.%d+%.%d+)$") or nil
end

--- The stalls of a flow's samples (ibv.samples, round trips in seconds):
-- those over STALL_FACTOR x their median, or over half of ack_s (the ack
-- timeout, seconds) whatever the median.
function flows.stalls(s, median, ack_s)
  local limit = math.min(flows.STALL_FACTOR * median, ack_s / 2)
  local n, i = 0, s:count()
  while i >= 1 and s:sorted(i) > limit do n, i = n + 1, i - 1 end
  return n
end

local function num(v) return v and string.format("%.6g", v) or "-" end
local function clean(s) return (tostring(s):gsub("[\n|]", " ")) end

-- hops as a word: "-" not traced, "." traced and none, else addresses joined by "," ("*": no answer)
local function hops_word(h)
  if h == nil then return "-" end
  if #h == 0 then return "." end
  local w = {}
  for i, x in ipairs(h) do w[i] = x or "*" end
  return table.concat(w, ",")
end

local function hops_of(w)
  if w == "-" then return nil end
  local h = {}
  if w == "." then return h end
  for x in w:gmatch("[^,]+") do h[#h + 1] = x ~= "*" and x or false end
  return h
end

--- Flow j of the out end this rank holds with peer on rail: its line.  fig:
-- label, sport, src, dst (IPv4 text or nil), lat_us, samples, stalls,
-- write_mbs, send_mbs, hops (nil: not traced), error.
function flows.line(rail, peer, j, fig)
  return string.format("L %d %d %d %d %s %s %s %s %d %d %s %s %s|%s", rail, peer, j, fig.label or 0,
    fig.sport or "-", fig.src or "-", fig.dst or "-", num(fig.lat_us), fig.samples or 0, fig.stalls or 0,
    num(fig.write_mbs), num(fig.send_mbs), hops_word(fig.hops), fig.error and clean(fig.error) or "")
end

local LINE = "^L (%d+) (%d+) (%d+) (%d+) (%S+) (%S+) (%S+) (%S+) (%d+) (%d+) (%S+) (%S+) (%S+)|(.*)$"

--- A flow line of rank src (its out end) as the contract's record:
-- {a, b, rail, flow, host_a, host_b, src, dst, sport, dport, flow_label,
-- lat_us, samples, stalls, write_mbs, send_mbs, failed, hops}; nil when the
-- line is not one.  hosts: rank + 1 -> host name.
function flows.parse(line, a, hosts)
  local rail, b, j, label, sport, sip, dip, lat, samples, stalls, w, s, hops, why = line:match(LINE)
  if not rail then return nil end
  b = tonumber(b)
  return { a = a, b = b, rail = tonumber(rail), flow = tonumber(j), host_a = hosts and hosts[a + 1],
    host_b = hosts and hosts[b + 1], src = sip ~= "-" and sip or nil, dst = dip ~= "-" and dip or nil,
    sport = tonumber(sport), dport = sip ~= "-" and flows.DPORT or nil, flow_label = tonumber(label),
    lat_us = tonumber(lat), samples = tonumber(samples), stalls = tonumber(stalls), write_mbs = tonumber(w),
    send_mbs = tonumber(s), failed = why ~= "" and why or nil, hops = hops_of(hops) }
end

--- Whether a pair record's flows stand out: one failed, or stalled.  Such a
-- pair reaches rank 0 with its flows even when its own figures pass (a
-- reduced pass: ibverbs.bringup.matrix.ledger), so the diagnosis sees the
-- bad flow and its clean siblings.
function flows.stand_out(x)
  for _, fl in ipairs(x.flows or {}) do
    if fl.failed or (fl.stalls or 0) > 0 then return true end
  end
  return false
end

--- Every flow record of the stores given (a pass's store: results.lua), in
-- their order, each with its pass: the list rank 0's diagnosis reads.
function flows.list(...)
  local out = {}
  for i = 1, select("#", ...) do
    local store = select(i, ...)
    for _, x in ipairs(store and store.list or {}) do
      for _, fl in ipairs(x.flows or {}) do
        fl.pass, fl.round = x.pass, x.round
        out[#out + 1] = fl
      end
    end
  end
  return out
end

return flows
