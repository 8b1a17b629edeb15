--- A flow's traced hops turned into the switch links it crossed, against a
-- topology file's graph (ibverbs.bringup.topology.graph): each answering hop
-- mapped to its switch, a hop that did not answer filled in where the file
-- leaves one switch possible, and what contradicts the file noted (a host
-- whose first hop is another leaf than the file's: miscabled; reported, not
-- trusted).
--
--   local trace = require "ibverbs.bringup.topology.trace"
--   local path, note = trace.path(g, flow, switch_at)
--   -- flow: { host_a =, host_b =, rail =, dst = "10.0.2.13", hops = { "10.0.1.1", false, "10.0.2.1" } }
--   -- path: { "leaf1 -- spine2", "leaf2 -- spine2" }; note (nil when there is nothing to say):
--   --   { miscabled = { host =, file_leaf =, traced = }, miscabled_all = { ... }, filled = n,
--   --     gaps = { { from =, to =, hops =, choices = } }, partial = true, unknown = { "10.9.9.9" },
--   --     (choices: the walks of the file that fit the gap, counted up to 64)
--   --     unlinked = { "leafX -- spineY" }, untraced = true }
local graph = require "ibverbs.bringup.topology.graph"

local trace = {}

local MAX_TAIL = 8 -- the most links a trace's unanswered end is filled with
local COUNT = 63 -- a gap's choices are counted up to COUNT + 1

-- The slots of the flow's hops: a switch name, or false (no answer, or an address no switch has),
-- up to the destination's own answer; whether the destination answered.
local function slots_of(flow, switch_at, note)
  local slots, reached = {}, false
  for _, h in ipairs(flow.hops) do
    if h and h == flow.dst then reached = true; break end
    local s = h and switch_at(h)
    if h and not s then
      note.unknown = note.unknown or {}
      note.unknown[#note.unknown + 1] = h
    end
    if not (s and s == slots[#slots]) then slots[#slots + 1] = s or false end -- (a switch that answered twice)
  end
  if not reached then
    while #slots > 0 and not slots[#slots] do slots[#slots] = nil end
  end
  return slots, reached
end

local function miscabled(note, host, file_leaf, traced)
  local m = { host = host, file_leaf = file_leaf, traced = traced }
  note.miscabled = note.miscabled or m
  note.miscabled_all = note.miscabled_all or {}
  note.miscabled_all[#note.miscabled_all + 1] = m
end

-- The gap between slots i and j (both switches, those between unanswered) filled when one walk of the
-- file fits it, else noted.
local function fill(g, slots, i, j, note)
  local walks = graph.walks(g, slots[i], slots[j], j - i, COUNT)
  if #walks == 1 then
    for k = i + 1, j - 1 do slots[k] = walks[1][k - i + 1] end
    note.filled = (note.filled or 0) + 1
  else
    note.gaps = note.gaps or {}
    note.gaps[#note.gaps + 1] = { from = slots[i], to = slots[j], hops = j - i - 1, choices = #walks }
    note.partial = true
  end
end

-- The end of the trace: its last switch against the file's leaf of the destination (fb).  A leaf
-- other than fb, reached past the first switch or right before the destination: miscabled; a
-- switch above: the way down to fb filled when the file leaves one shortest walk.
local function close_end(g, flow, slots, reached, note, answered)
  local fb, last = graph.leaf(g, flow.host_b, flow.rail), slots[#slots]
  if not fb or last == fb or not last then return end
  local is_leaf = g.switches[last] and g.switches[last].hosts
  if answered[#slots] and (reached or (is_leaf and #slots >= 2)) then
    miscabled(note, flow.host_b, fb, last)
    return
  end
  for n = 1, MAX_TAIL do
    local walks = graph.walks(g, last, fb, n, COUNT)
    if #walks == 1 then
      for k = 2, #walks[1] do slots[#slots + 1] = walks[1][k] end
      note.filled = (note.filled or 0) + 1
      return
    elseif #walks > 1 then
      note.gaps = note.gaps or {}
      note.gaps[#note.gaps + 1] = { from = last, to = fb, hops = n - 1, choices = #walks }
      note.partial = true
      return
    end
  end
  note.partial = true
end

--- The links flow crossed from its hops (flow.hops; switch_at(hop) -> switch name or nil), and a note
-- or nil (above); nil, { untraced = true } when neither a switch nor the destination answered, nil
-- when the flow has no hops.
function trace.path(g, flow, switch_at)
  if type(flow.hops) ~= "table" then return nil end
  local note = {}
  local slots, reached = slots_of(flow, switch_at, note)
  local answered, any = {}, reached
  for k, s in ipairs(slots) do
    answered[k] = s and true
    any = any or answered[k]
  end
  if not any then
    note.untraced = true
    return nil, note
  end
  local fa = graph.leaf(g, flow.host_a, flow.rail)
  if not slots[1] then
    slots[1] = fa or false
    if fa then note.filled = (note.filled or 0) + 1 end
  elseif fa and slots[1] ~= fa then
    miscabled(note, flow.host_a, fa, slots[1])
  end
  local fb = graph.leaf(g, flow.host_b, flow.rail)
  if reached and not slots[#slots] and fb then -- (the switch before the destination: its leaf, as the file says)
    slots[#slots] = fb
    note.filled = (note.filled or 0) + 1
  end
  local last_known
  for j = 1, #slots do
    if slots[j] then
      if last_known and j > last_known + 1 then fill(g, slots, last_known, j, note) end
      last_known = j
    end
  end
  if not slots[1] then note.partial = true end
  close_end(g, flow, slots, reached, note, answered)
  local path = {}
  for k = 1, #slots - 1 do
    local x, y = slots[k], slots[k + 1]
    if x and y then
      path[#path + 1] = graph.key(x, y)
      if not (g.adj[x] and g.adj[x][y]) then
        note.unlinked = note.unlinked or {}
        note.unlinked[#note.unlinked + 1] = graph.key(x, y)
      end
    end
  end
  return path, next(note) and note or nil
end

return trace
