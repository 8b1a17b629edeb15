--- bench/sim_world.lua: the measurement a simulated rank makes instead of
-- traffic (bench/fabric_sim.lua): fabric_matrix.lua runs unchanged, its rails
-- and pair traffic replaced by these (package.loaded), its port counters read
-- from these rails.  Figures are drawn from a distribution of a healthy
-- 400 Gb/s fabric, with planted faults:
--   a slow node: both bandwidths at 45 % on every rail, with every partner;
--   a slow link: one direction, one rail, latency x 6;
--   a lossy link: both directions, one rail, figures healthy, its ends'
--     transport counters rising (out_of_sequence, local_ack_timeout_err:
--     about 0.002 a packet, above the floor 0.001).
--
--   local world = require "sim_world"
--   local faults = world.faults(n, rounds)    -- every process of a run computes the same
--   world.install(n, nrails, faults)
local schedule = require "ibverbs.bringup.matrix.schedule"
local real_traffic = require "ibverbs.bringup.matrix.pair_traffic"
local pcount = require "ibverbs.bringup.matrix.pair_counters"

local world = {}

world.LAT_US = 1.9 -- one way
world.WRITE_MBS = 46000 -- 400 Gb/s, 92 %
world.SEND_MBS = 45500
world.PACKETS = 34000 -- a port's packets each way in a round (64 KiB messages in 4 KiB MTUs, and the pings)

local function gauss()
  return math.sqrt(-2 * math.log(1 - math.random())) * math.cos(2 * math.pi * math.random())
end

--- The planted faults of an n-rank run of the tournament's first rounds
-- (rounds: at least 10): {slow_node = r, slow_link = {a, b, rail}, lossy = {c, d, rail}}.
function world.faults(n, rounds)
  assert(rounds >= 10, "the faults need 10 rounds")
  local s = schedule.new("tournament", n)
  local slow = math.floor(n / 3)
  local a = math.floor(n / 2)
  local b = s:partners(a, 5)
  local c = math.floor(n / 5)
  local d = s:partners(c, 9)
  for _, x in ipairs({ a, b, c, d }) do assert(x ~= slow, "a planted link touches the slow node") end
  assert(a ~= c and a ~= d and b ~= c and b ~= d, "the planted links share a rank")
  return { slow_node = slow, slow_link = { a, b, 3 }, lossy = { c, d, 5 } }
end

--- The verdicts the faults must give, as "kind ranks rail" strings (rail names: rail_name(k)).
function world.expected(faults, nrails, rail_name)
  local out = {}
  for k = 1, nrails do out[#out + 1] = string.format("node %d %s", faults.slow_node, rail_name(k)) end
  local sl, lo = faults.slow_link, faults.lossy
  out[#out + 1] = string.format("link %d,%d %s", math.min(sl[1], sl[2]), math.max(sl[1], sl[2]), rail_name(sl[3]))
  out[#out + 1] = string.format("link %d,%d %s", math.min(lo[1], lo[2]), math.max(lo[1], lo[2]), rail_name(lo[3]))
  table.sort(out)
  return out
end

local function rail_name(k) return string.format("mlx5_%d:1", k - 1) end
world.rail_name = rail_name

local T = {}
T.__index = T

-- One out end's figures: latency and its percentiles, both bandwidths.
local function out_figures(e, faults, me)
  local slow = me == faults.slow_node or e.peer == faults.slow_node
  local sl = faults.slow_link
  local lat = world.LAT_US * (1 + 0.02 * gauss()) * (slow and 1.2 or 1)
  if me == sl[1] and e.peer == sl[2] and e.rail.index == sl[3] then lat = lat * 6 end
  local bw = slow and 0.45 or 1
  return { lat_us = lat, lat_p99_us = lat * 1.3, lat_p999_us = lat * 1.6, lat_max_us = lat * 3,
    write_mbs = world.WRITE_MBS * (1 + 0.005 * gauss()) * bw, send_mbs = world.SEND_MBS * (1 + 0.005 * gauss()) * bw }
end

-- A port's counters over one end of a round: its packets, and the retries of a lossy link.
local function count(rail, e, faults, me)
  local c = rail.counters
  c.port_xmit_packets = c.port_xmit_packets + world.PACKETS
  c.port_rcv_packets = c.port_rcv_packets + world.PACKETS
  c.port_xmit_data = c.port_xmit_data + world.PACKETS * 1024
  c.port_rcv_data = c.port_rcv_data + world.PACKETS * 1024
  local lo = faults.lossy
  local on_lossy = (me == lo[1] and e.peer == lo[2]) or (me == lo[2] and e.peer == lo[1])
  if e.kind == "out" and rail.index == lo[3] and on_lossy then
    c.out_of_sequence = c.out_of_sequence + 280 + math.random(0, 40)
    c.local_ack_timeout_err = c.local_ack_timeout_err + 140 + math.random(0, 20)
  end
end

function T:new_end(rail, kind, peer) return { rail = rail, kind = kind, peer = peer, me = self.me, psn = 1 } end

function T.connect(_, e) e.connected = true end

function T:run(ends)
  local o = self.o
  for _, e in ipairs(ends) do
    if e.kind == "out" then e.res = out_figures(e, self.faults, self.me)
    else e.res = { data_ok = true, verified = o.lat_size + o.bw_size + self.ring_n * o.bw_size } end
    count(e.rail, e, self.faults, self.me)
  end
end

--- Installs the simulated rails, traffic and counter reading for an n-rank run with these faults.
function world.install(n, nrails, faults)
  local traffic = {
    sizes = real_traffic.sizes, ack_seconds = real_traffic.ack_seconds, bw_phase_limit = real_traffic.bw_phase_limit,
    parse_info = real_traffic.parse_info, rails_per_call = real_traffic.rails_per_call, close_end = function() end,
  }
  function traffic.new(cfg)
    return setmetatable({ o = cfg.o, me = cfg.me, faults = faults, ring_n = real_traffic.sizes(cfg.o).ring_n }, T)
  end
  function traffic.info(rail, e) -- as long as a real one: an InfiniBand GID, an address, a key
    return string.format("%d %d %d %d %s %.0f %d", 0x1000 + e.me * 7 % 0xffffff, e.psn, rail.lid, 4096,
      string.format("fe80:0000:0000:0000:0c42:a103:%04x:%04x", e.me % 65536, rail.index), 140737488355328 + e.me,
      0x2000 + e.peer)
  end
  package.loaded["ibverbs.bringup.matrix.pair_traffic"] = traffic
  package.loaded["ibverbs.bringup.rails"] = {
    open = function()
      local out = {}
      for k = 1, nrails do
        out[k] = { index = k, name = rail_name(k), port = 1, lid = k, counters = { port_xmit_packets = 0,
          port_rcv_packets = 0, port_xmit_data = 0, port_rcv_data = 0, out_of_sequence = 0, local_ack_timeout_err = 0,
          symbol_error = 0, link_downed = 0 } }
      end
      return out
    end,
  }
  pcount.read = function(rails)
    local out, lost = {}, {}
    for _, r in ipairs(rails) do
      local c = {}
      for k, v in pairs(r.counters) do c[k] = v end
      out[r.index], lost[r.index] = c, {}
    end
    return out, lost
  end
  return n
end

return world
