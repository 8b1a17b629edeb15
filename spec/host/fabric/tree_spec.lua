-- ibverbs.fabric.tree: route over relays of groups of k (on by itself past
-- fabric.TREE_MIN ranks), a relay that leaves or hangs buried alone, its
-- members adopted by rank 0; rank 0 naming whom it waits for (on_wait); a
-- script that never closes its group ending cleanly.
local fabric = require "ibverbs.fabric"
local fs = require "fabric_support"
local free_port, LUA, CPATH, env = fs.free_port, fs.LUA, fs.CPATH, fs.env

-- The relay tree: rounds of route (each rank to rank+k and rank-k), one JSON
-- line per rank; rank LEAVE exits after round 1 (or stops: STOP=1, a hung rank).
local TREE = [[
local fabric = require "ibverbs.fabric"
local dkjson = require "dkjson"
local f, err = fabric.init{ timeout = tonumber(os.getenv("T")), host = "h" .. os.getenv("IBV_FABRIC_RANK"),
  tolerant = os.getenv("TOLERANT") == "1" }
if not f then print(dkjson.encode{ init_err = err }) os.exit(2) end
local out = { rank = f.rank, got = {}, ups = {}, waits = {} }
if f.rank == 0 and f.wait_every then f.on_wait = function(who) out.waits[#out.waits + 1] = who end end
local errf = os.getenv("WAIT_FAIL") and os.tmpname()
if errf and f.rank == 0 then -- a callback that raises: said on stderr (kept here), the collectives go on
  local on_wait = f.on_wait
  f.on_wait = function(who) on_wait(who) error("boom") end
  io.stderr = assert(io.open(errf, "w"))
end
if os.getenv("SLOW_WAIT") and f.rank == 0 then -- a callback slower than wait_every
  local on_wait = f.on_wait
  f.on_wait = function(who) on_wait(who) os.execute("sleep 0.5") end
end
if tonumber(os.getenv("LATE") or -1) == f.rank then os.execute("sleep " .. (os.getenv("LATE_S") or 1.5)) end
local reduce = os.getenv("REDUCE") and function(l) -- a sum, and how many values each reduction took
  local sum, calls = 0, {}
  for _, s in ipairs(l) do
    local v, c = s:match("^(%d+) ?(.*)$")
    sum = sum + tonumber(v)
    calls[#calls + 1] = c ~= "" and c or "1"
  end
  return sum .. " " .. #l .. ":" .. table.concat(calls, ",")
end
for k = 1, 3 do
  local got, ups = f:route({ { (f.rank + k) % f.size, "from " .. f.rank }, { (f.rank - k) % f.size, { r = f.rank } } },
    reduce and tostring(f.rank) or ("up " .. f.rank), nil, reduce)
  if not got then out.err = ups break end
  local seen = {}
  for _, m in ipairs(got) do seen[#seen + 1] = m[1] .. "=" .. (type(m[2]) == "table" and m[2].r or m[2]) end
  table.sort(seen)
  out.got[k] = table.concat(seen, ",")
  if f.rank == 0 then out.ups[k] = ups end
  if k == 1 and tonumber(os.getenv("LEAVE") or -1) == f.rank then
    print(dkjson.encode{ left = true }) io.stdout:flush()
    if os.getenv("STOP") then os.execute("sleep " .. (os.getenv("STOP_S") or 14)) end -- alive, connected, silent
    os.exit(0)
  end
end
out.dead = f:dead_ranks()
if errf and f.rank == 0 then io.stderr:close() out.stderr = io.open(errf):read("a") os.remove(errf) end
print(dkjson.encode(out))
]]

local function tree_ranks(size, vars, skip)
  local which = {}
  for r = 0, size - 1 do if r ~= skip then which[#which + 1] = r end end
  return fs.ranks(TREE, size, which, vars)
end

-- What rank r must get in round k of TREE from the live ranks.
local function tree_expect(size, r, k, dead)
  local l = {}
  local a, b = (r - k) % size, (r + k) % size
  if not dead[a] then l[#l + 1] = a .. "=from " .. a end
  if not dead[b] then l[#l + 1] = b .. "=" .. b end
  table.sort(l)
  return table.concat(l, ",")
end

describe("ibverbs.fabric's relay tree (route through relays of groups of k)", function()
  it("routes every message to its rank and gives rank 0 every up, as the star does", function()
    local out = tree_ranks(9, "T=10 IBV_FABRIC_GROUP=3")
    for r = 0, 8 do
      assert.is_table(out[r], "rank " .. r)
      assert.is_nil(out[r].err)
      for k = 1, 3 do assert.equal(tree_expect(9, r, k, {}), out[r].got[k]) end
    end
    for k = 1, 3 do for r = 0, 8 do assert.equal("up " .. r, out[0].ups[k][r + 1]) end end
  end)

  it("reduces the ups on the way up with route's reduce: each relay its group's, rank 0 the relays' and its own",
    function()
      for _, group in ipairs({ 3, 0 }) do -- the tree, and the star (rank 0 reduces every up)
        local out = tree_ranks(9, "T=10 REDUCE=1 IBV_FABRIC_GROUP=" .. group)
        for r = 0, 8 do for k = 1, 3 do assert.equal(tree_expect(9, r, k, {}), out[r].got[k]) end end
        for k = 1, 3 do
          -- rank 0 (a group of its own) reduced 4 values: its own and one reduction from each relay (ranks
          -- 1-3, 4-6, 7-8); the star: 9 values, each its own
          assert.equal(group == 3 and "36 4:1,3:1,1,1,3:1,1,1,2:1,1" or "36 9:1,1,1,1,1,1,1,1,1", out[0].ups[k])
        end
      end
    end)

  it("is on by itself past fabric.TREE_MIN ranks: 100 ranks in groups of 10", function()
    local out = tree_ranks(100, "T=30")
    for r = 0, 99 do
      assert.is_table(out[r], "rank " .. r)
      for k = 1, 3 do assert.equal(tree_expect(100, r, k, {}), out[r].got[k], "rank " .. r) end
    end
  end)

  local function relay_lost(vars) -- rank 4: the relay of ranks 4-6
    local out = tree_ranks(9, "T=4 IBV_FABRIC_GROUP=3 TOLERANT=1 LEAVE=4 " .. vars)
    for r = 0, 8 do
      if r ~= 4 then
        assert.is_table(out[r], "rank " .. r)
        assert.is_nil(out[r].err)
        assert.equal(1, #out[r].dead)
        assert.equal(4, out[r].dead[1].rank)
        for k = 2, 3 do assert.equal(tree_expect(9, r, k, { [4] = true }), out[r].got[k], "rank " .. r) end
      end
    end
    return out
  end

  it("buries a relay that leaves (tolerant) and no other rank: its members go on through rank 0", function()
    local out = relay_lost("")
    assert.matches("rank 4 %(h4%) left the fabric during route", out[0].dead[1].why)
  end)

  it("buries a relay that hangs (tolerant) at its limit, and no other rank; rank 0 names it while it waits",
    function()
      local out = relay_lost("STOP=1 IBV_FABRIC_WAIT_EVERY=1")
      assert.matches("rank 4 %(h4%) did not arrive at route #3 within 4 s", out[0].dead[1].why)
      local named = 0 -- a busy host may make another rank late for a moment too
      for _, who in ipairs(out[0].waits) do if who == "rank 4 (h4), relay of ranks 4-6" then named = named + 1 end end
      assert.is_true(named >= 2, table.concat(out[0].waits, " | "))
    end)

  it("has rank 0 name the rank a star collective waits for, every wait_every seconds, until the limit", function()
    local out = tree_ranks(4, "T=2 IBV_FABRIC_GROUP=0 TOLERANT=1 LEAVE=2 STOP=1 STOP_S=4 IBV_FABRIC_WAIT_EVERY=0.4")
    local named = 0 -- a busy host may make another rank late for a moment too
    for _, who in ipairs(out[0].waits) do if who:find("rank 2 (h2)", 1, true) then named = named + 1 end end
    assert.is_true(named >= 2 and named <= 6, table.concat(out[0].waits, " | "))
    assert.equal(2, out[0].dead[1].rank)
    assert.same({}, out[1].waits) -- only rank 0 was asked to
  end)

  it("still reads the ranks while an on_wait callback is slower than wait_every: a late rank is not buried",
    function()
      local out = tree_ranks(3, "T=4 IBV_FABRIC_GROUP=0 TOLERANT=1 LATE=2 SLOW_WAIT=1 IBV_FABRIC_WAIT_EVERY=0.2")
      assert.is_true(#out[0].waits >= 1 and #out[0].waits <= 4, table.concat(out[0].waits, " | "))
      for r = 0, 2 do
        assert.same({}, out[r].dead, "rank " .. r)
        for k = 1, 3 do assert.equal(tree_expect(3, r, k, {}), out[r].got[k], "rank " .. r) end
      end
    end)

  it("keeps a collective's limit while rank 0 wakes every millisecond (the loop's timer stops its run)", function()
    -- before: a timer due as libuv's run began fired before the poll, which then slept until a frame came
    local out = tree_ranks(2, "T=1 IBV_FABRIC_GROUP=0 LATE=1 LATE_S=3 IBV_FABRIC_WAIT_EVERY=0.001")
    assert.matches("^rank 1 %(h1%) did not arrive at route #%d+ within 1 s$", out[0].err)
    assert.is_true(#out[0].waits > 50, #out[0].waits)
  end)

  it("refuses a wait_every that is not a number of seconds above 0", function()
    for _, v in ipairs({ 0, -1, "soon", 1 / 0 }) do
      local f, err = fabric.init{ rank = 0, size = 2, wait_every = v, getenv = function() return nil end }
      assert.is_nil(f)
      assert.equal("fabric: wait_every must be a number of seconds above 0, got " .. tostring(v), err)
    end
    local f, err = fabric.init{ rank = 0, size = 2, getenv = env{ IBV_FABRIC_WAIT_EVERY = "0" } }
    assert.is_nil(f)
    assert.matches("wait_every must be a number of seconds above 0, got 0", err)
  end)

  it("says once on stderr that an on_wait callback raised, drops it, and goes on with the collective", function()
    local out = tree_ranks(4, "T=2 IBV_FABRIC_GROUP=0 TOLERANT=1 LEAVE=2 STOP=1 STOP_S=4 IBV_FABRIC_WAIT_EVERY=0.4 "
      .. "WAIT_FAIL=1")
    assert.equal(1, #out[0].waits)
    assert.matches("^ibverbs%.fabric: on_wait failed, not called again: .*boom\n$", out[0].stderr)
    assert.equal(2, out[0].dead[1].rank)
    for _, r in ipairs({ 0, 1, 3 }) do assert.equal(tree_expect(4, r, 3, { [2] = true }), out[r].got[3]) end
  end)

  it("fails every rank with the relay's name when a relay leaves a fabric that is not tolerant", function()
    local out = tree_ranks(9, "T=4 IBV_FABRIC_GROUP=3 LEAVE=4")
    for r = 0, 8 do
      if r ~= 4 then assert.matches("rank 4 %(h4%)", out[r].err, "rank " .. r) end
    end
  end)

  it("ends a script that never called close without a crash (rank 0 and the relays hold libuv handles)", function()
    -- after a route, and right after the rendezvous (rank 0's newest poll never waited on: SIGSEGV before)
    for _, body in ipairs({ 'assert(f:route({}, "x"))', "" }) do
      local script = os.tmpname()
      local fh = assert(io.open(script, "w"))
      fh:write('local f = assert(require("ibverbs.fabric").init{ timeout = 10 }) ' .. body .. ' print("ok")')
      fh:close()
      local port = free_port()
      local p = io.popen(string.format("for r in 0 1 2 3; do (IBV_FABRIC_RANK=$r IBV_FABRIC_SIZE=4 IBV_FABRIC_GROUP=2 "
        .. "IBV_FABRIC_ROOT=127.0.0.1:%d LUA_PATH='lua/?.lua;;' LUA_CPATH='%s' timeout 30 %s %s; "
        .. "echo \"rank $r: $?\") & done; wait", port, CPATH, LUA, script))
      local out = p:read("a")
      p:close()
      os.remove(script)
      for r = 0, 3 do assert.matches("rank " .. r .. ": 0\n", out, body) end
    end
  end)
end)
