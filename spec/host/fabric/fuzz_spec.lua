-- ibverbs.fabric's wire fuzzed: a run of five ranks on loopback TCP (relay
-- groups of two: rank 0 alone, relays 1 and 3) where one rank, rank 0, a
-- relay or a member, sends one of its frames mutated (bytes flipped, a
-- length that lies, a cut frame, a header that is no length, a body of
-- random bytes, numbers changed, a frame twice) at a step of the protocol:
-- its hello, the welcome, an allgather, a route (the bundles and the
-- reduction on the way up), a barrier.  Whatever happens, no rank raises a
-- Lua error, every rank ends within the time limit (no hang), and a rank
-- that fails says so with an error that names a rank.
local dkjson = require "dkjson"
local socket = require "socket"
local fs = require "fabric_support"

local SIZE, T = 5, 3

-- A rank: its sends through the patched wire.send_raw when it is the mutant;
-- every call protected, one JSON line: ok, or the error returned, or the Lua error.
local RANK = [[
local dkjson = require "dkjson"
local wire = require "ibverbs.fabric.wire"
local rank = tonumber(os.getenv("IBV_FABRIC_RANK"))
if rank == tonumber(os.getenv("MUTANT")) then
  math.randomseed(tonumber(os.getenv("SEED")))
  local at, kind, n = tonumber(os.getenv("AT")), os.getenv("KIND"), 0
  local send_raw = wire.send_raw
  local function rnd(len)
    local t = {}
    for i = 1, len do t[i] = string.char(math.random(0, 255)) end
    return table.concat(t)
  end
  local mutate = {
    flip = function(s) -- three bytes of the body changed
      for _ = 1, 3 do
        local i = math.random(9, math.max(9, #s))
        if i <= #s then s = s:sub(1, i - 1) .. string.char((s:byte(i) + math.random(1, 255)) % 256) .. s:sub(i + 1) end
      end
      return s
    end,
    lie = function(s) return string.format("%08x", #s - 8 + math.random(1, 4096)) .. s:sub(9) end,
    cut = function(s) return s:sub(1, math.random(1, math.max(1, #s - 1))) end,
    header = function(s) return "zz" .. s:sub(3) end,
    random = function(s) return string.format("%08x", #s - 8) .. rnd(#s - 8) end,
    numbers = function(s)
      return s:sub(1, 8) .. s:sub(9):gsub("%d", function() return tostring(math.random(0, 9)) end)
    end,
    twice = function(s) return s .. s end,
  }
  wire.send_raw = function(sock, s, deadline)
    n = n + 1
    if n == at then s = mutate[kind](s) end
    return send_raw(sock, s, deadline)
  end
end
local out = {}
local ok, lerr = pcall(function()
  local fabric = require "ibverbs.fabric"
  local f, err = fabric.init{ timeout = tonumber(os.getenv("T")), host = "h" .. rank, group = 2 }
  if not f then out.err = err return end
  local steps = {
    function() return f:allgather(rank) end,
    function() return f:route({ { (rank + 1) % f.size, "m" .. rank } }, "up" .. rank, nil,
      function(l) return table.concat(l, ",") end) end,
    function() return f:route({ { (rank + 2) % f.size, "n" .. rank } }, "u" .. rank) end,
    function() return f:barrier() end,
  }
  for i, step in ipairs(steps) do
    local v, e = step()
    if v == nil then out.err, out.step = e, i return end
  end
  out.ok = true
  f:close()
end)
if not ok then out.lua_error = tostring(lerr) end
print(dkjson.encode(out))
]]

local KINDS = { "flip", "lie", "cut", "header", "random", "numbers", "twice" }

-- Every case: the mutant rank (0 rank 0, 1 a relay, 2 a member), the frame it mutates, how, the seed.
local function cases()
  local list = {}
  math.randomseed(tonumber(os.getenv("FUZZ_SEED") or os.time()))
  -- (rank 0 sends a challenge, a proof and a welcome to each rank before the collectives; a relay and a
  -- member fewer frames a run)
  for _, m in ipairs({ { 0, 30 }, { 1, 16 }, { 2, 8 } }) do
    for _ = 1, 6 do
      list[#list + 1] = { mutant = m[1], at = math.random(1, m[2]), kind = KINDS[math.random(#KINDS)],
        seed = math.random(1, 1e6) }
    end
  end
  return list
end

-- Runs every case at once, each a job of SIZE ranks on its own port; each case's lines by rank.
local function run_all(list)
  local script = os.tmpname()
  local fh = assert(io.open(script, "w"))
  fh:write(RANK)
  fh:close()
  for _, c in ipairs(list) do
    local port = fs.free_port()
    c.files = {}
    for r = 0, SIZE - 1 do
      c.files[r] = os.tmpname()
      os.execute(string.format("MUTANT=%d AT=%d KIND=%s SEED=%d T=%d IBV_FABRIC_RANK=%d IBV_FABRIC_SIZE=%d "
        .. "IBV_FABRIC_ROOT=127.0.0.1:%d LUA_PATH='lua/?.lua;;' LUA_CPATH='%s' timeout %d %s %s > %s 2>&1 &",
        c.mutant, c.at, c.kind, c.seed, T, r, SIZE, port, fs.CPATH, 4 * T + 25, fs.LUA, script, c.files[r]))
    end
  end
  local deadline = socket.gettime() + 4 * T + 30
  for _, c in ipairs(list) do
    c.out = {}
    for r = 0, SIZE - 1 do
      local line
      repeat
        local h = io.open(c.files[r])
        local text = h and h:read("a") or ""
        if h then h:close() end
        line = text:match("^({[^\n]*})\n") or text:match("\n({[^\n]*})\n")
        if line then c.out[r] = dkjson.decode(line) else socket.sleep(0.2) end
      until line or socket.gettime() > deadline
      os.remove(c.files[r])
    end
  end
  os.remove(script)
end

describe("ibverbs.fabric's wire under mutated frames", function()
  it("never raises, never hangs, and fails only naming a rank: rank 0, a relay, a member, every step", function()
    local list = cases()
    run_all(list)
    local failed, completed = 0, 0
    for _, c in ipairs(list) do
      local what = string.format("mutant rank %d, frame %d, %s, seed %d", c.mutant, c.at, c.kind, c.seed)
      for r = 0, SIZE - 1 do
        local o = c.out[r]
        assert.is_table(o, what .. ": rank " .. r .. " printed nothing (a hang past the limit, or a crash)")
        assert.is_nil(o.lua_error, what .. ": rank " .. r .. " raised " .. tostring(o.lua_error))
        if o.ok then
          completed = completed + 1
        else
          failed = failed + 1
          assert.matches("rank %d", tostring(o.err), what .. ": rank " .. r)
        end
      end
    end
    -- both outcomes seen: the fuzzing reaches frames that break the run and frames that do not
    assert.is_true(failed > 0 and completed > 0, failed .. " failed, " .. completed .. " completed")
  end)
end)
