--- bench/fault_sim.lua: the fabric's localization (ibverbs.bringup.matrix.localize,
-- the code rank 0 runs) at scale, on the flows of a simulated rail-optimized
-- leaf-spine (bench/fault_world.lua) with planted faults: per case, the
-- precision and recall of its fabric verdicts, the hosts it blames, the
-- pairs a fabric fault leaves to the node diagnosis, and its CPU time against
-- the pass's.  bench/run-fault-sim runs the cases of docs/bringup.md's table.
--
--   lua5.4 bench/fault_sim.lua [--nodes 12500] [--rails 8] [--leaf 32] [--spines 32] [--flows 8] [-n 500]
--     [--rounds 8] [--first] [--trials 1] [--seed 1] [--mode known|traced|candidates] [--view standout|all]
--     [--gray K --loss X [--one-way]] [--dead-spine] [--down-spine] [--lossy-hosts H] [--slow-nodes S]
--     [--p-stall 1e-5] [--noise-bad 1e-4] [--z 3 --min-bad 3 --alpha 0.01 --hit-fraction 0.25 --noise-factor 4]
--     [--round-ms 35]
--     [--name NAME] [--json] [--header]
--   lua5.4 bench/fault_sim.lua docs docs/bringup.md TABLE   the rows of TABLE between the doc's marks
--   local sim = require "fault_sim"; local r = sim.run(opts)   -- the same, as a table (the spec's)
--
-- The flows: those of --rounds rounds of the tournament (its first rounds
-- with --first, else rounds spread evenly over the pass), each pair both
-- ways on every rail, --flows flows a pair record, -n split among them; of
-- those, what reaches rank 0 (--view: the records with a stalled or failed
-- flow or failing figures, as past 16 ranks; or all), carrying the path
-- --mode says.  localize.run gets them with the tool's defaults and the
-- fabric's topology.conf read by ibverbs.bringup.topology.
--
-- The scoring.  A planted fault is a gray link (its key) or a dead spine (its
-- links).  A located verdict is true when one of its links (v.links: its
-- twins, or a switch's links) is a planted fault's; a planted fault is found
-- when a verdict names one of its links.  precision = true verdicts /
-- verdicts, recall = faults found / faults planted, over every trial.  Hosts
-- blamed: the host ends localize hands to the node diagnosis (res.hosts) on a
-- healthy host.  Pairs left: the pairs of healthy hosts with a flow that
-- crossed a planted fault and stalled or failed, not explained
-- (res.explained): the node diagnosis gets them, and the fault, unlike noise,
-- is still there in its retest.  Host faults: the planted lossy host links and
-- slow nodes' rails among res.hosts; hidden: their pairs explained.
--
-- The time: localize.run's CPU (os.clock) at rank 0; the pass: the
-- tournament's N-1 rounds at --round-ms (35: docs/bringup.md's projection at
-- 400 Gb/s).  Its share of the pass, when rank 0 localizes every round's
-- flows: CPU / (rounds x round time) (linear in the flows); when it
-- localizes a sample of --rounds rounds: CPU / the pass.
package.path = "bench/?.lua;" .. package.path
local localize = require "ibverbs.bringup.matrix.localize"
local topology = require "ibverbs.bringup.topology"
local world = require "fault_world"

local sim = {}

sim.DEFAULTS = { rounds = 8, trials = 1, mode = "known", view = "standout", gray = 0, loss = 0.01,
  lossy_hosts = 0, slow_nodes = 0, round_ms = 35, host_loss = 0.01 }

--- The tournament's rounds over n ranks.
function sim.pass_rounds(n) return n % 2 == 0 and n - 1 or n end

-- The rounds sampled: the first, or spread evenly over the pass's.
local function rounds_of(o, total)
  local l = {}
  for i = 1, math.min(o.rounds, total) do
    l[i] = o.first and (i - 1) or math.floor((i - 0.5) * total / o.rounds)
  end
  return l
end

-- Plants the case's faults in w: what was planted ({units = {{name, keys = set}}, hosts = {[rank] = rails set
-- or true}}).
local function plant(w, o)
  local f, units, hosts = {}, {}, {}
  if o.gray > 0 then
    f.gray = w:random_links(o.gray)
    for _, g in ipairs(f.gray) do
      g[5] = o.loss
      units[#units + 1] = { name = g[4], keys = { [g[4]] = true } }
    end
    f.one_way = o.one_way
  end
  if o.dead_spine or o.down_spine then
    local p, s = 1 + math.floor(w.r() * w.rails), 1 + math.floor(w.r() * w.spines)
    if o.dead_spine then
      f.dead_spine = { p, s }
      local keys = {}
      for l = 1, w.nleaves do keys[w.keys[p][l][s]] = true end
      units[#units + 1] = { name = w.spine_name[p][s], keys = keys }
    else f.down_spine = { p, s } end
  end
  local taken = {}
  local function host()
    local r
    repeat r = math.floor(w.r() * w.nodes) until not taken[r]
    taken[r] = true
    return r
  end
  f.host_loss, f.slow = {}, {}
  for _ = 1, o.lossy_hosts do
    local r, rail = host(), 1 + math.floor(w.r() * w.rails)
    f.host_loss[#f.host_loss + 1] = { r, rail, o.host_loss }
    hosts[r] = { [rail] = true }
  end
  for _ = 1, o.slow_nodes do
    local r = host()
    f.slow[#f.slow + 1] = r
    hosts[r] = true
  end
  w:plant(f)
  return { units = units, hosts = hosts }
end

-- Whether host end (rank r, rail) is a planted host fault.
local function faulty(planted, r, rail)
  local h = planted.hosts[r]
  return h == true or (h and h[rail]) or false
end

-- The scores of one trial (added into acc).
local function score(acc, res, flows, planted, rank_of)
  local hit = {}
  for _, v in ipairs(res.verdicts) do
    if v.located then
      local ok = false
      for _, key in ipairs(v.links) do
        for ui, u in ipairs(planted.units) do
          if u.keys[key] then ok = true; hit[ui] = true end
        end
      end
      acc.verdicts, acc.links = acc.verdicts + 1, acc.links + #v.links
      if ok then acc.true_verdicts = acc.true_verdicts + 1 end
    else
      acc.not_located = acc.not_located + 1
    end
  end
  acc.units = acc.units + #planted.units
  for ui in pairs(hit) do acc.found = acc.found + 1; acc.hit_units[#acc.hit_units + 1] = planted.units[ui].name end
  local want = {}
  for r, h in pairs(planted.hosts) do
    for rail = 1, acc.rails do
      if h == true or h[rail] then want[r .. ":" .. rail] = true; acc.host_faults = acc.host_faults + 1 end
    end
  end
  for _, h in ipairs(res.hosts) do
    local r = rank_of[h.host]
    if faulty(planted, r, h.rail) then
      if want[r .. ":" .. h.rail] then acc.host_found = acc.host_found + 1; want[r .. ":" .. h.rail] = nil end
    else
      acc.hosts_blamed = acc.hosts_blamed + 1
      acc.blamed[#acc.blamed + 1] = h.host .. " rail " .. h.rail
    end
  end
  local left, hidden = {}, {}
  for _, f in ipairs(flows) do
    local key = localize.key(f.a, f.b, f.rail)
    local host = faulty(planted, f.a, f.rail) or faulty(planted, f.b, f.rail)
    if host then
      if res.explained[key] then hidden[key] = true end
    elseif f.crossed and (f.failed or f.stalls > 0) and not res.explained[key] then
      left[key] = true
    end
  end
  for _ in pairs(left) do acc.pairs_left = acc.pairs_left + 1 end
  for _ in pairs(hidden) do acc.hidden = acc.hidden + 1 end
end

local function new_acc(o)
  return { rails = o.rails, verdicts = 0, true_verdicts = 0, links = 0, not_located = 0, units = 0, found = 0,
    hit_units = {}, host_faults = 0, host_found = 0, hosts_blamed = 0, blamed = {}, pairs_left = 0, hidden = 0,
    cpu = 0, gen = 0, flows = 0, view_flows = 0, view_records = 0, records = 0, bad = 0, unexplained = 0 }
end

-- One trial: a fabric drawn with seed, the case planted, the rounds' flows, localized and scored.
local function trial(o, seed, acc, topo)
  local w = world.new{ nodes = o.nodes, rails = o.rails, leaf = o.leaf, spines = o.spines, flows = o.flows,
    lat_iters = o.lat_iters, seed = seed, p_stall = o.p_stall, noise_bad = o.noise_bad }
  local planted = plant(w, o)
  local flows, st = {}, { records = 0, flows = 0, view_records = 0, view_flows = 0 }
  local t0 = os.clock()
  for _, k in ipairs(rounds_of(o, sim.pass_rounds(o.nodes))) do
    w:round(k, o, flows, st)
  end
  acc.gen = acc.gen + os.clock() - t0
  collectgarbage()
  t0 = os.clock()
  local lo = { topology = topo, reference = "best" } -- the tool's defaults, but for the thresholds given
  for _, k in ipairs({ "z", "min_bad", "hit_fraction", "noise_factor", "alpha" }) do lo[k] = o[k] end
  local res = localize.run(flows, lo)
  acc.cpu = acc.cpu + os.clock() - t0
  local rank_of = {}
  for r = 0, w.nodes - 1 do rank_of[w.names[r]] = r end
  score(acc, res, flows, planted, rank_of)
  acc.records, acc.flows = acc.records + st.records, acc.flows + st.flows
  acc.view_records, acc.view_flows = acc.view_records + st.view_records, acc.view_flows + st.view_flows
  acc.bad, acc.unexplained = acc.bad + res.bad, acc.unexplained + res.unexplained
  acc.heap_mb = math.max(acc.heap_mb or 0, collectgarbage("count") / 1024)
  return w
end

--- Runs a case (opts: sim.DEFAULTS, fault_world's sizes): its figures.
function sim.run(opts)
  local o = {}
  for k, v in pairs(world.DEFAULTS) do o[k] = v end
  for k, v in pairs(sim.DEFAULTS) do o[k] = v end
  for k, v in pairs(opts or {}) do o[k] = v end
  local probe = world.new{ nodes = o.nodes, rails = o.rails, leaf = o.leaf, spines = o.spines, flows = o.flows }
  local hosts = {}
  for r = 0, o.nodes - 1 do hosts[r + 1] = probe.names[r] end
  local topo = assert(topology.parse(probe.topology_text, "simulated topology.conf", { hosts = hosts,
    rails = o.rails }))
  local acc = new_acc(o)
  -- each trial's fabric from a seed drawn at random (Park-Miller streams of nearby seeds are alike)
  local seeds = world.random(o.seed)
  for _ = 1, o.trials do trial(o, 1 + math.floor(seeds() * 2147483645), acc, topo) end
  local total = sim.pass_rounds(o.nodes)
  acc.pass_rounds, acc.rounds, acc.trials = total, math.min(o.rounds, total), o.trials
  acc.precision = acc.verdicts > 0 and acc.true_verdicts / acc.verdicts or nil
  acc.recall = acc.units > 0 and acc.found / acc.units or nil
  local per_trial = acc.cpu / o.trials
  acc.cpu_per_trial = per_trial
  acc.share_every_round = per_trial / (acc.rounds * o.round_ms / 1000)
  acc.share_sample = per_trial / (total * o.round_ms / 1000)
  acc.opts = o
  return acc
end

-- ------------------------------------------------------------------ the command line

local FLAGS = { ["--nodes"] = "nodes", ["--rails"] = "rails", ["--leaf"] = "leaf", ["--spines"] = "spines",
  ["--flows"] = "flows", ["-n"] = "lat_iters", ["--rounds"] = "rounds", ["--trials"] = "trials", ["--seed"] = "seed",
  ["--gray"] = "gray", ["--loss"] = "loss", ["--lossy-hosts"] = "lossy_hosts", ["--slow-nodes"] = "slow_nodes",
  ["--round-ms"] = "round_ms", ["--z"] = "z", ["--min-bad"] = "min_bad", ["--hit-fraction"] = "hit_fraction",
  ["--noise-factor"] = "noise_factor", ["--alpha"] = "alpha", ["--p-stall"] = "p_stall", ["--noise-bad"] = "noise_bad" }
local WORDS = { ["--mode"] = { "mode", { known = true, traced = true, candidates = true } },
  ["--view"] = { "view", { standout = true, all = true } }, ["--name"] = { "name" } }
local SWITCHES = { ["--first"] = "first", ["--one-way"] = "one_way", ["--dead-spine"] = "dead_spine",
  ["--down-spine"] = "down_spine", ["--json"] = "json", ["--header"] = "header" }

--- The options of a command line (arg), or nil and what is wrong.
function sim.options(args)
  local o, i = {}, 1
  while i <= #args do
    local a, v = args[i], args[i + 1]
    if FLAGS[a] then
      if not tonumber(v) or tonumber(v) < 0 then return nil, a .. ": a number expected, got " .. tostring(v) end
      o[FLAGS[a]], i = tonumber(v), i + 2
    elseif WORDS[a] then
      local w = WORDS[a]
      if v == nil or (w[2] and not w[2][v]) then
        local ok = {}
        for x in pairs(w[2] or {}) do ok[#ok + 1] = x end
        table.sort(ok)
        return nil, string.format("%s: %s expected, got %s", a, #ok > 0 and table.concat(ok, ", ") or "a word",
          tostring(v))
      end
      o[w[1]], i = v, i + 2
    elseif SWITCHES[a] then
      o[SWITCHES[a]], i = true, i + 1
    else
      return nil, "unknown option " .. tostring(a)
    end
  end
  return o
end

local function pct(x) return x and string.format("%.1f %%", 100 * x) or "-" end

sim.HEADER = "| case | paths | verdicts (true) | precision | recall | links a verdict | hosts blamed | pairs left "
  .. "| host faults found (hidden) | flows drawn | at rank 0 | bad | localize CPU | share: every round's flows "
  .. "| share: a sample |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"

--- A case's row of the table.
function sim.row(r)
  local o = r.opts
  return string.format("| %s | %s | %d (%d) | %s | %s | %s | %d | %d | %s | %s | %s | %s | %.2f s | %s | %s |",
    o.name or "case", o.mode, r.verdicts, r.true_verdicts, pct(r.precision), pct(r.recall),
    r.true_verdicts > 0 and string.format("%.1f", r.links / r.verdicts) or "-", r.hosts_blamed, r.pairs_left,
    r.host_faults > 0 and string.format("%d of %d (%d)", r.host_found, r.host_faults, r.hidden) or "-",
    string.format("%.1f M", r.flows / r.trials / 1e6), string.format("%.0f", r.view_flows / r.trials),
    string.format("%.0f", r.bad / r.trials), r.cpu_per_trial, pct(r.share_every_round), pct(r.share_sample))
end

local MARKS = { "<!-- bench-fault-sim: the table -->", "<!-- bench-fault-sim: end -->" }

--- The doc's text with the table between its marks replaced by the table's lines of text; or nil and why.
function sim.docs(doc, text)
  local i, j = doc:find(MARKS[1], 1, true), doc:find(MARKS[2], 1, true)
  if not (i and j and i < j) then return nil, "no marks " .. MARKS[1] .. " ... " .. MARKS[2] end
  local rows = {}
  for line in text:gmatch("[^\n]+") do
    if line:sub(1, 1) == "|" then rows[#rows + 1] = line end
  end
  return doc:sub(1, i + #MARKS[1]) .. table.concat(rows, "\n") .. "\n" .. doc:sub(j)
end

if ... ~= "fault_sim" and arg[1] == "docs" then -- bench/fault_sim.lua docs DOC TABLE: the table into the doc
  local f = assert(io.open(arg[2]))
  local doc = f:read("a")
  f:close()
  f = assert(io.open(arg[3]))
  local text, err = sim.docs(doc, f:read("a"))
  f:close()
  if not text then io.stderr:write("fault_sim.lua: ", arg[2], ": ", err, "\n"); os.exit(1) end
  f = assert(io.open(arg[2], "w"))
  f:write(text)
  f:close()
elseif ... ~= "fault_sim" then -- run as a script
  local o, err = sim.options(arg)
  if not o then io.stderr:write("fault_sim.lua: ", err, "\n"); os.exit(2) end
  local ok, r = pcall(sim.run, o)
  if not ok then io.stderr:write("fault_sim.lua: ", tostring(r), "\n"); os.exit(2) end
  if o.json then
    local dkjson = require "dkjson"
    r.opts = nil
    print(dkjson.encode(r))
  else
    if o.header then print(sim.HEADER) end
    print(sim.row(r))
    io.stderr:write(string.format("fault_sim: %s: %d trial(s) of %d rounds of %d (%s), flows drawn in %.1f s, "
      .. "localized in %.2f s, heap %.0f MB; found %s; blamed %s\n", o.name or "case", r.trials, r.rounds,
      r.pass_rounds, o.first and "the first" or "spread", r.gen, r.cpu, r.heap_mb, table.concat(r.hit_units, ", "),
      table.concat(r.blamed, ", ")))
  end
end

return sim
