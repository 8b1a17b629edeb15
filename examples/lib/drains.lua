--- fabric_matrix.lua --drain: rank 0's report told to Slurm.  Every node a
-- verdict names (a node, flap or unreachable verdict on it, an end of a link
-- verdict, an end of a flagged pair left unjudged) is drained with a reason
-- "ibverbs: <its verdicts>"; every node whose ranks measured a pair and have
-- no verdict is resumed when its drain reason starts with "ibverbs:".  A node
-- drained for any other reason is left alone (ibverbs.fabric.slurm.settle).
--
--   local drains = require "drains"
--   local bad, passed = drains.plan(rep, drains.nodes(all_local, rep.hosts))
--   drains.apply(rep, drains.nodes(all_local, rep.hosts), print, function(l) io.stderr:write(l, "\n") end)
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

--- What --drain asks of Slurm for the report rep (matrix.text's: verdicts,
-- at_fault, pairs, size) with each rank's node (nodes, indexed rank + 1):
-- bad (node -> its verdicts' text, "; " between them) and passed (a sorted
-- list: the nodes that measured a pair and on which no rank is at fault);
-- and the ranks at fault without a node name (a list).
function drains.plan(rep, nodes)
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
    for _, r in ipairs(v.ranks) do
      named[r] = true
      blame(r, verdict_text(v))
    end
  end
  for _, r in ipairs(rep.at_fault or {}) do
    if not named[r] then blame(r, "an end of a flagged pair left unjudged (not retested)") end
  end
  local bad = {}
  for node, list in pairs(texts) do bad[node] = table.concat(list, "; ") end
  local measured, seen, passed = {}, {}, {}
  for _, p in ipairs(rep.pairs or {}) do
    if p.lat_us and not p.error and not p.unmeasured then measured[p.src], measured[p.dst] = true, true end
  end
  for r = 0, rep.size - 1 do
    local node = nodes[r + 1]
    if node and measured[r] and not bad[node] and not seen[node] then
      seen[node] = true
      passed[#passed + 1] = node
    end
  end
  table.sort(passed)
  return bad, passed, unnamed
end

--- Tells Slurm (slurm.settle) and says what was done: out(line) for each
-- "slurm: ..." line, err(line) for each failure and for each rank at fault
-- whose node has no name.  Returns whether every call succeeded.
function drains.apply(rep, nodes, out, err)
  local bad, passed, unnamed = drains.plan(rep, nodes)
  for _, r in ipairs(unnamed) do
    err(string.format("slurm: rank %d (%s) not drained: its host name is not a Slurm node name", r,
      tostring(rep.hosts[r + 1])))
  end
  local lines, errs = slurm.settle(bad, passed)
  for _, l in ipairs(lines) do out(l) end
  for _, l in ipairs(errs) do err(l) end
  return #errs == 0 and #unnamed == 0
end

return drains
