--- fabric_matrix.lua --drain: rank 0's report told to Slurm.  Every node a
-- verdict names (a node, flap or unreachable verdict on it, an end of a link
-- verdict, an end of a flagged pair left unjudged) is drained with a reason
-- "ibverbs fabric_matrix [<the rails of its ranks>]: <its verdicts>"; every
-- node whose ranks measured a pair and have no verdict is resumed when
-- fabric_matrix drained it and it measured pairs on every rail of that
-- scope in this run.  A node held (DOWN, FAIL, MAINT, ...) or drained by
-- anyone else, fabric_check included, is left alone
-- (ibverbs.fabric.slurm.settle).  A fabric verdict (a switch link, a pair
-- whose paths differ: ibverbs.bringup.matrix.localize's) drains no node:
-- Slurm cannot drain a switch, and the ends of its flows are healthy (they
-- pass, and are resumed as any node that passed).
--
--   local drains = require "ibverbs.bringup.matrix.drains"
--   local bad, passed, unnamed, scopes = drains.plan(rep, drains.nodes(all_local, rep.hosts), rail_names)
--   drains.apply(rep, drains.nodes(all_local, rep.hosts), print, function(l) io.stderr:write(l, "\n") end,
--     rail_names)                                    -- rail_names[rank + 1]: that rank's rails ("rxe0:1", ...)
local slurm = require "ibverbs.fabric.slurm"

local drains = {}

--- Each rank's Slurm node (indexed rank + 1): the name the rank itself sent
-- (all_local[r + 1].node: its slurm.node_name()), else its host name up to
-- the first dot when that is a node name (a rank that never sent one); nil
-- when there is none.
function drains.nodes(all_local, hosts)
  local nodes = {}
  for i, host in ipairs(hosts) do
    local l = all_local[i]
    local name = l and l.node or tostring(host):match("^[^.]*")
    if slurm.check_node(name) then nodes[i] = name end
  end
  return nodes
end

-- A verdict in a few words: "link node2 <-> node3 rxe0:1: both pass ...", "node rxe0:1: ...".
local function verdict_text(v)
  local hosts = v.hosts or {}
  return v.kind .. (#hosts > 1 and (" " .. table.concat(hosts, " <-> ")) or "") .. (v.rail and (" " .. v.rail) or "")
    .. ": " .. tostring(v.why)
end

-- The names in set (name -> true), sorted.
local function sorted(set)
  local l = {}
  for k in pairs(set) do l[#l + 1] = k end
  table.sort(l)
  return l
end

-- Each node's rails (node -> sorted list): for a node in bad, every rail of
-- its ranks in this run (what a run must measure on it again); for the
-- others, the rails on which its ranks measured a pair (each end its own
-- rail k: rail_names[rank + 1][k]).
local function node_rails(rep, nodes, rail_names, bad)
  local sets = {}
  local function add(r, k)
    local node, names = nodes[r + 1], rail_names[r + 1] or {}
    if not node then return end
    sets[node] = sets[node] or {}
    for i, name in ipairs(names) do
      if k == nil or k == i then sets[node][name] = true end
    end
  end
  for r = 0, rep.size - 1 do
    if bad[nodes[r + 1]] then add(r) end
  end
  for _, p in ipairs(rep.pairs or {}) do
    if p.lat_us and not p.error and not p.unmeasured then
      for _, r in ipairs({ p.src, p.dst }) do
        if not bad[nodes[r + 1]] then add(r, p.rail or 1) end
      end
    end
  end
  local out = {}
  for node, set in pairs(sets) do out[node] = sorted(set) end
  return out
end

--- What --drain asks of Slurm for the report rep (matrix.text's: verdicts,
-- at_fault, pairs, size) with each rank's node (nodes, indexed rank + 1) and
-- rails (rail_names, indexed rank + 1: {"rxe0:1", ...}): bad (node -> its
-- verdicts' text, "; " between them) and passed (a sorted list: the nodes
-- that measured a pair and on which no rank is at fault); the ranks at
-- fault without a node name (a list); and each node's rails (node -> sorted
-- list): a bad node's scope, the rails a passed node measured.
function drains.plan(rep, nodes, rail_names)
  local texts, unnamed = {}, {}
  local function blame(r, text)
    local node = nodes[r + 1]
    if not node then unnamed[#unnamed + 1] = r; return end
    texts[node] = texts[node] or {}
    for _, t in ipairs(texts[node]) do
      if t == text then return end -- two ranks of one node with one verdict each: said once
    end
    table.insert(texts[node], text)
  end
  local named = {}
  for _, v in ipairs(rep.verdicts or {}) do
    for _, r in ipairs(v.kind ~= "fabric" and v.ranks or {}) do
      named[r] = true
      blame(r, verdict_text(v))
    end
  end
  for _, r in ipairs(rep.at_fault or {}) do
    if not named[r] then blame(r, "an end of a flagged pair left unjudged (not retested)") end
  end
  local bad = {}
  for node, list in pairs(texts) do bad[node] = table.concat(list, "; ") end
  local scopes = node_rails(rep, nodes, rail_names or {}, bad)
  local seen, passed = {}, {}
  for r = 0, rep.size - 1 do
    local node = nodes[r + 1]
    if node and scopes[node] and not bad[node] and not seen[node] then
      seen[node] = true
      passed[#passed + 1] = node
    end
  end
  table.sort(passed)
  return bad, passed, unnamed, scopes
end

--- Tells Slurm (slurm.settle) and says what was done: out(line) for each
-- "slurm: ..." line, err(line) for each failure and for each rank at fault
-- whose node has no name.  Returns whether every call succeeded.
function drains.apply(rep, nodes, out, err, rail_names)
  local bad, passed, unnamed, scopes = drains.plan(rep, nodes, rail_names)
  for _, r in ipairs(unnamed) do
    err(string.format("slurm: rank %d (%s) not drained: its host name is not a Slurm node name", r,
      tostring(rep.hosts[r + 1])))
  end
  local why, measured = {}, {}
  for node, text in pairs(bad) do why[node] = { why = text, ports = scopes[node] or {} } end
  for _, node in ipairs(passed) do measured[node] = scopes[node] end
  local lines, errs = slurm.settle("fabric_matrix", why, measured)
  local fabric = 0
  for _, v in ipairs(rep.verdicts or {}) do if v.kind == "fabric" then fabric = fabric + 1 end end
  if fabric > 0 then
    out(string.format("slurm: %d fabric verdict%s drain%s no node (Slurm cannot drain a switch or its links)", fabric,
      fabric == 1 and "" or "s", fabric == 1 and "s" or ""))
  end
  for _, l in ipairs(lines) do out(l) end
  for _, l in ipairs(errs) do err(l) end
  return #errs == 0 and #unnamed == 0
end

return drains
