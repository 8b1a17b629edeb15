-- lua/ibverbs/bringup/topology/dot.lua (topology.dot, topology.plot): a
-- topology drawn as Graphviz DOT, the links fabric verdicts name in red with
-- their evidence, the hosts other verdicts name in red, fabric faults not
-- located listed; written next to --plot's file and rendered to SVG by
-- Graphviz's dot (on this machine: `make packages` installs graphviz), only
-- the DOT file where no dot is on PATH; and fabric_matrix.lua --plot with
-- --topology writing both.
local topology = require "ibverbs.bringup.topology"
local fs = require "fabric_support"

local FIX = "spec/fixtures/topology/"

local function lines_of(text)
  local set = {}
  for l in text:gmatch("[^\n]+") do set[l] = true end
  return set
end

local GRAY = { kind = "fabric", link = "leaf1 -- spine2", located = true, flows = 40, bad = 12, loss = 0.005,
  lat_factor = 3.2, clean_siblings = 28 }

describe("topology.dot", function()
  local topo = assert(topology.read(FIX .. "two_tier_rails.conf"))

  it("draws every switch tier by tier, every link, every host under its leaf; a bad link red with its evidence",
    function()
    local text = topology.dot(topo, { GRAY, { kind = "node", hosts = { "gpu003" }, ranks = { 2 } } })
    local l = lines_of(text)
    assert.equal("graph fabric {", text:match("^[^\n]+"))
    assert.is_true(l['  { rank=same; "spine1"; "spine2"; "r2-spine1"; "r2-spine2"; }'])
    assert.is_true(l['  { rank=same; "leaf1"; "leaf2"; "r2-leaf1"; "r2-leaf2"; }'])
    assert.is_true(text:find('rank=same; "spine1"', 1, true) < text:find('rank=same; "leaf1"', 1, true)) -- top first
    assert.is_true(l['  "spine2" -- "leaf1" [color=red, penwidth=3, fontcolor=red, label="12 of 40 flows bad\\nloss '
      .. '~0.5 %\\nlatency x3.2\\n28 clean on sibling paths"];'])
    assert.is_true(l['  "spine1" -- "leaf1";'])
    assert.is_true(l['  "host gpu003" [label="gpu003", shape=ellipse, fillcolor=salmon];']) -- a node verdict's host
    assert.is_true(l['  "host gpu004" [label="gpu004", shape=ellipse, fillcolor=white];'])
    assert.is_true(l['  "leaf1" -- "host gpu004";'])
    assert.is_true(l['  "r2-leaf1" -- "host gpu004";'])
    assert.equal(1, select(2, text:gsub("penwidth=3", ""))) -- the one bad link
    assert.equal("}\n", text:sub(-2))
  end)

  it("draws a traced link the file lacks dashed, lists fabric faults not located, counts hosts past the limit",
    function()
    local text = topology.dot(topo, { { kind = "fabric", link = "leaf1 -- leaf2", located = true, why = "traced" },
      { kind = "fabric", located = false, hosts = { "gpu001", "gpu005" }, why = "3 of 8 flows bad, by path" } },
      { max_hosts = 4 })
    local l = lines_of(text)
    assert.is_true(l['  "leaf1" -- "leaf2" [color=red, penwidth=3, style=dashed, fontcolor=red, label="traced\\n'
      .. '(not in the topology)"];'])
    assert.is_true(l['  label="fabric faults not located:\\ngpu001 - gpu005: 3 of 8 flows bad, by path"; labelloc=b;'])
    assert.is_true(l['  "leaf1" [label="leaf1\\n(4 hosts)"];'])
    assert.is_nil(text:find("host gpu001", 1, true))
  end)

  it("escapes quotes and backslashes in names and labels", function()
    local p = os.tmpname()
    fs.write(p, 'SwitchName=sw\\\\a Nodes=n1\nSwitchName=top Switches=sw\\\\a\n') -- (Slurm's "\\": one "\")
    local text = topology.dot(assert(topology.read(p)), { { kind = "fabric", link = "sw\\a -- top",
      why = 'the "odd" one' } })
    os.remove(p)
    assert.truthy(text:find('  "top" -- "sw\\\\a" [color=red, penwidth=3, fontcolor=red, label="the \\"odd\\" one"];',
      1, true))
  end)
end)

describe("topology.plot", function()
  local topo = assert(topology.read(FIX .. "two_tier_rails.conf"))

  it("writes <plot file>.topology.dot and renders it to .svg with dot", function()
    local base = os.tmpname()
    local files = assert(topology.plot(topo, { GRAY }, base .. ".png"))
    assert.same({ dot = base .. ".topology.dot", svg = base .. ".topology.svg" }, files)
    assert.equal(topology.dot(topo, { GRAY }), fs.slurp(files.dot))
    local svg = assert(fs.slurp(files.svg))
    assert.truthy(svg:find("<svg", 1, true))
    assert.truthy(svg:find("12 of 40 flows bad", 1, true)) -- the evidence drawn
    os.remove(files.dot); os.remove(files.svg); os.remove(base)
  end)

  it("writes the DOT file alone when no dot is on PATH; says why dot failed", function()
    local base = os.tmpname()
    local h = io.popen("PATH=/nonexistent LUA_PATH='lua/?.lua;;' /usr/bin/" .. fs.LUA .. " -e 'local t = require "
      .. "\"ibverbs.bringup.topology\"; local f = assert(t.plot(assert(t.read(\"" .. FIX .. "two_tier_rails.conf\")), "
      .. "{}, \"" .. base .. ".svg\")); print(f.dot, f.svg)' 2>&1")
    local out = h:read("a")
    h:close()
    assert.equal(base .. ".topology.dot\tnil\n", out)
    assert.is_nil(io.open(base .. ".topology.svg"))
    local fail = function() return { status = 1, stdout = "", stderr = "Error: syntax error in line 1\n" } end
    assert.same({ nil, "dot failed: exit 1: Error: syntax error in line 1" },
      { topology.plot(topo, {}, base .. ".svg", { spawn = fail }) })
    assert.same({ nil, "cannot write /nonexistent/m.topology.dot: /nonexistent/m.topology.dot: No such file or "
      .. "directory" }, { topology.plot(topo, {}, "/nonexistent/m.png") })
    os.remove(base .. ".topology.dot"); os.remove(base)
  end)

  it("fabric_matrix.lua --plot with --topology writes the drawing beside the heatmaps", function()
    local dir = os.tmpname()
    os.remove(dir)
    os.execute("mkdir " .. dir)
    fs.write(dir .. "/t.conf", "SwitchName=leaf1 Nodes=node0[1-2]\nSwitchName=spine1 Switches=leaf1\n")
    local _, rc = fs.job("examples/fabric_matrix.lua", 2, "--dry-run --topology " .. dir .. "/t.conf --plot " .. dir
      .. "/m.png", function(r) return "SLURMD_NODENAME=node0" .. (r + 1) .. " " end)
    assert.same({ [0] = 0, 0 }, rc)
    assert.truthy(fs.slurp(dir .. "/m.topology.dot"):find('"leaf1" -- "host node02";', 1, true))
    assert.truthy(fs.slurp(dir .. "/m.topology.svg"):find("<svg", 1, true))
    os.execute("rm -r " .. dir)
  end)
end)
