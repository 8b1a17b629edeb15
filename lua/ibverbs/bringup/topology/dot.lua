--- A topology drawn: Graphviz DOT text of its switches (tier by tier, the
-- top ones first), their links and hosts, the links fabric verdicts name in
-- red with their evidence, the hosts other verdicts name in red; and the
-- drawing written next to fabric_matrix's --plot file, rendered to SVG when
-- Graphviz's `dot` is on PATH (run through ibv.spawn: no shell).
--
--   local dot = require "ibverbs.bringup.topology.dot"
--   local text = dot.text(topo, verdicts, { max_hosts = 64 })
--   local files, err = dot.plot(topo, verdicts, "m.png")  -- { dot = "m.topology.dot", svg = "m.topology.svg" }
--
-- A fabric verdict: { kind = "fabric", link = "leaf1 -- spine1", located = true, flows =, bad =, loss =,
-- lat_factor =, clean_siblings = } (located = false: listed under the drawing, not drawn); any other
-- verdict's hosts (v.hosts) are drawn red.  Past max_hosts hosts (default 64), a leaf says how many it
-- has instead of drawing them.
local dot = {}

dot.TIMEOUT = 120 -- seconds dot may take before it is killed

-- s as a DOT string.
local function q(s)
  return '"' .. tostring(s):gsub('[\\"]', "\\%0"):gsub("\n", "\\n") .. '"'
end

-- Each switch's tier: 0 for a leaf (a switch with hosts), else one more than the lowest neighbour's.
local function tiers(g)
  local tier, queue, i = {}, {}, 1
  for _, name in ipairs(g.order) do
    if g.switches[name].hosts then tier[name] = 0; queue[#queue + 1] = name end
  end
  while queue[i] do
    local s = queue[i]
    for o in pairs(g.adj[s]) do
      if not tier[o] then tier[o] = tier[s] + 1; queue[#queue + 1] = o end
    end
    i = i + 1
  end
  for _, name in ipairs(g.order) do tier[name] = tier[name] or 1 end
  return tier
end

-- The evidence of a fabric verdict, one short line per figure.
local function evidence(v)
  local out = {}
  if v.bad and v.flows then out[#out + 1] = string.format("%d of %d flows bad", v.bad, v.flows) end
  if v.loss then out[#out + 1] = string.format("loss ~%.3g %%", v.loss <= 1 and v.loss * 100 or v.loss) end
  if v.lat_factor then out[#out + 1] = string.format("latency x%.3g", v.lat_factor) end
  if v.clean_siblings then out[#out + 1] = string.format("%d clean on sibling paths", v.clean_siblings) end
  if #out == 0 and v.why then out[1] = v.why end
  return table.concat(out, "\n")
end

-- The verdicts sorted out: bad[link key] = verdict, red[host] = true, loose (fabric verdicts not located).
local function sort_verdicts(verdicts)
  local bad, red, loose = {}, {}, {}
  for _, v in ipairs(verdicts or {}) do
    if v.kind == "fabric" then
      if v.located ~= false and v.link then bad[v.link] = v else loose[#loose + 1] = v end
    else
      for _, h in ipairs(v.hosts or {}) do red[h] = true end
    end
  end
  return bad, red, loose
end

-- The lines of the switches, tier by tier (a rank each), and of the hosts.
local function node_lines(g, tier, max_hosts, out)
  local top, nhosts = 0, 0
  for _, name in ipairs(g.order) do
    top = math.max(top, tier[name])
    nhosts = nhosts + #(g.switches[name].hosts or {})
  end
  local draw_hosts = nhosts <= max_hosts
  for t = top, 0, -1 do
    local same = {}
    for _, name in ipairs(g.order) do
      if tier[name] == t then
        local hosts = g.switches[name].hosts
        local label = (hosts and not draw_hosts) and string.format("%s\n(%d hosts)", name, #hosts) or name
        out[#out + 1] = string.format("  %s [label=%s];", q(name), q(label))
        same[#same + 1] = q(name)
      end
    end
    if #same > 0 then out[#out + 1] = "  { rank=same; " .. table.concat(same, "; ") .. "; }" end
  end
  return draw_hosts
end

--- The DOT text of topo (a topology of ibverbs.bringup.topology) with verdicts marked (see above).
function dot.text(topo, verdicts, opts)
  local g, max_hosts = topo.g, opts and opts.max_hosts or 64
  local tier = tiers(g)
  local bad, red, loose = sort_verdicts(verdicts)
  local out = { "graph fabric {", "  graph [splines=true, nodesep=0.3, ranksep=1.0, fontname=Helvetica];",
    "  node [shape=box, style=filled, fillcolor=lightgrey, fontname=Helvetica];",
    "  edge [color=gray40, fontname=Helvetica, fontsize=10];" }
  local draw_hosts = node_lines(g, tier, max_hosts, out)
  local drawn = {}
  for _, key in ipairs(topo:links()) do
    local a, b = key:match("^(.-) %-%- (.+)$")
    if tier[a] < tier[b] then a, b = b, a end
    local v = bad[key]
    drawn[key] = true
    if v then
      out[#out + 1] = string.format("  %s -- %s [color=red, penwidth=3, fontcolor=red, label=%s];", q(a), q(b),
        q(evidence(v)))
    else
      out[#out + 1] = string.format("  %s -- %s;", q(a), q(b))
    end
  end
  local extra = {}
  for key in pairs(bad) do if not drawn[key] then extra[#extra + 1] = key end end
  table.sort(extra)
  for _, key in ipairs(extra) do -- (a link the file lacks: traced, named by its two ends)
    local a, b = key:match("^(.-) %-%- (.+)$")
    out[#out + 1] = string.format("  %s -- %s [color=red, penwidth=3, style=dashed, fontcolor=red, label=%s];",
      q(a or key), q(b or "?"), q(evidence(bad[key]) .. "\n(not in the topology)"))
  end
  if draw_hosts then
    for _, name in ipairs(g.order) do
      for _, h in ipairs(g.switches[name].hosts or {}) do
        local id = "host " .. h
        out[#out + 1] = string.format("  %s [label=%s, shape=ellipse, fillcolor=%s];", q(id), q(h),
          red[h] and "salmon" or "white")
        out[#out + 1] = string.format("  %s -- %s;", q(name), q(id))
      end
    end
  end
  if #loose > 0 then
    local lines = { "fabric faults not located:" }
    for _, v in ipairs(loose) do
      lines[#lines + 1] = string.format("%s%s", table.concat(v.hosts or v.pair or {}, " - "),
        v.why and (": " .. v.why) or "")
    end
    out[#out + 1] = string.format("  label=%s; labelloc=b;", q(table.concat(lines, "\n")))
  end
  out[#out + 1] = "}"
  return table.concat(out, "\n") .. "\n"
end

-- Whether a program of that name is on PATH.
local function on_path(prog)
  for dir in (os.getenv("PATH") or ""):gmatch("[^:]+") do
    local fh = io.open(dir .. "/" .. prog)
    if fh then fh:close(); return true end
  end
  return false
end

--- The drawing written next to plot_file (fabric_matrix's --plot: "m.png" -> m.topology.dot), and
-- rendered to m.topology.svg when dot is on PATH (opts.spawn: ibv.spawn's stand-in).  { dot =, svg = }
-- (svg nil without dot), or nil, msg.
function dot.plot(topo, verdicts, plot_file, opts)
  opts = opts or {}
  local base = plot_file:gsub("%.[%w]+$", "") .. ".topology"
  local files = { dot = base .. ".dot" }
  local fh, err = io.open(files.dot, "w")
  if not fh then return nil, "cannot write " .. files.dot .. ": " .. tostring(err) end
  fh:write(dot.text(topo, verdicts, opts))
  fh:close()
  if not opts.spawn and not on_path("dot") then return files end
  local spawn = opts.spawn or require("ibverbs.core").spawn -- (here: reading a topology needs no C module)
  local svg = base .. ".svg"
  local r, serr = spawn({ "dot", "-Tsvg", "-o", svg, files.dot }, { timeout = dot.TIMEOUT })
  if not r then return nil, "dot failed: " .. tostring(serr) end
  if r.timed_out then return nil, string.format("dot failed: no result within %g s", dot.TIMEOUT) end
  if r.status ~= 0 then
    return nil, "dot failed: " .. (r.status and "exit " .. r.status or "signal " .. tostring(r.signal)) .. ": "
      .. (r.stderr .. r.stdout):gsub("%s+$", "")
  end
  files.svg = svg
  return files
end

return dot
