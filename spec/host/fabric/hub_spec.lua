-- ibverbs.fabric.hub: rank 0 with more ranks than FD_SETSIZE (epoll through
-- lua-luv), the refusal of such a group without lua-luv, and the wait of a
-- member on its two sockets.
local fs = require "fabric_support"
local free_port, LUA, CPATH = fs.free_port, fs.LUA, fs.CPATH

-- Ranks 1 .. n-1 played by one process (the wire protocol by hand: an 8-digit
-- hex length, then dkjson; rank 0's challenge read, the hello said, rank 0's
-- vouch and welcome read), so that rank 0 meets more ranks than select() can
-- wait on without starting a thousand interpreters.
local MANY = [[
local socket = require "socket"
local dkjson = require "dkjson"
local n, port = tonumber(arg[1]), tonumber(arg[2])
local function frame(t) local s = dkjson.encode(t) return string.format("%08x", #s) .. s end
local function read(c)
  local head = assert(c:receive(8))
  return assert(dkjson.decode(assert(c:receive(tonumber(head, 16)))))
end
local socks = {}
for r = 1, n - 1 do
  local c
  for _ = 1, 200 do c = socket.connect("127.0.0.1", port) if c then break end socket.sleep(0.05) end
  assert(c, "rank " .. r .. " cannot connect")
  c:settimeout(60)
  assert(read(c).challenge) -- (no key: the hello needs no proof)
  assert(c:send(frame{ hello = "ibverbs.fabric", rank = r, size = n, host = "m" .. r }))
  socks[r] = c
end
for r = 1, n - 1 do assert(read(socks[r]).vouch) assert(read(socks[r]).welcome) end
for r = 1, n - 1 do assert(socks[r]:send(frame{ op = "allgather", seq = 1, v = r })) end
local ok = true
for r = 1, n - 1 do
  local m = read(socks[r])
  ok = ok and #m.v == n and m.v[r + 1] == r
end
for r = 1, n - 1 do assert(socks[r]:send(frame{ op = "route", seq = 2, v = { m = { { 0, r } } } })) end
for r = 1, n - 1 do ok = ok and #read(socks[r]).v == 0 end
print(ok and "ranks ok" or "ranks wrong")
]]

describe("ibverbs.fabric at rank 0 with more ranks than FD_SETSIZE", function()
  it("meets 1100 ranks and runs allgather and route among them (epoll through lua-luv, backlog 4096)", function()
    local n, port = 1100, free_port()
    local helper = os.tmpname()
    local fh = assert(io.open(helper, "w")); fh:write(MANY); fh:close()
    local root = os.tmpname()
    fh = assert(io.open(root, "w"))
    fh:write(string.format([[
      local fabric = require "ibverbs.fabric"
      local f = assert(fabric.init{ rank = 0, size = %d, port = %d, timeout = 60, host = "r0", group = 0 })
      local all = assert(f:allgather(0))
      local got, ups = assert(f:route({}, "zero"))
      print("root ok", #all, f.hosts[%d], #got, ups[1])
    ]], n, port, n))
    fh:close()
    local p = io.popen(string.format("ulimit -n 4096; LUA_PATH='lua/?.lua;;' LUA_CPATH='%s' timeout 120 %s %s 2>&1 & "
      .. "LUA_PATH='lua/?.lua;;' timeout 120 %s %s %d %d 2>&1; wait", CPATH, LUA, root, LUA, helper, n, port))
    local out = p:read("a")
    p:close()
    os.remove(helper); os.remove(root)
    assert.matches("ranks ok", out)
    assert.matches("root ok\t1100\tm1099\t1099\tzero", out)
  end)

  it("refuses such a fabric without lua-luv rather than fail in select()", function()
    -- a rank 0 whose luv is missing: package.preload makes require fail
    local out = io.popen("LUA_PATH='lua/?.lua;;' " .. LUA .. [[ -e 'package.preload.luv = function() error("none") end
      local fabric = require "ibverbs.fabric"
      print(select(2, fabric.init{ rank = 0, size = 2000, port = 1, timeout = 1 }))' 2>&1]]):read("a")
    assert.matches("rank 0 waits on 1999 ranks: that needs lua%-luv", out)
  end)
end)

describe("ibverbs.fabric.hub without a fabric", function()
  local socket = require "socket"
  local hub = require "ibverbs.fabric.hub"
  local wire = require "ibverbs.fabric.wire"

  -- A connected pair of TCP sockets on loopback: the near end, the far end.
  local function pair()
    local l = assert(socket.bind("127.0.0.1", 0))
    local c = assert(socket.connect("127.0.0.1", (select(2, l:getsockname()))))
    local s = assert(l:accept())
    l:close()
    return c, s
  end

  it("gives a member the first of its two sockets with something to read, in the order given", function()
    local a, a_far = pair()
    local b, b_far = pair()
    assert.same({ nil, "timeout" }, { hub.first_readable({ a, b }, socket.gettime() + 0.05) })
    assert(b_far:send(wire.encode({ x = 1 })))
    assert.equal(b, hub.first_readable({ a, b }, socket.gettime() + 5))
    assert(a_far:send(wire.encode({ y = 2 })))
    socket.sleep(0.05)
    assert.equal(a, hub.first_readable({ a, b }, socket.gettime() + 5)) -- both ready: the relay's first
    assert.same({ y = 2 }, wire.read(a, socket.gettime() + 5))
    for _, s in ipairs({ a, a_far, b, b_far }) do s:close() end
  end)

  it("splits what a connection sends into frames and says when it closes (libuv and select alike)", function()
    for _, use_uv in ipairs({ true, false }) do
      local h = hub.new(use_uv)
      local near, far = pair()
      local c = h:add(near)
      local body = wire.route_encode(3, { m = { { 1, "a" } } })
      -- until c has n frames: each wake-up visits c
      local function wait_frames(n)
        local deadline = socket.gettime() + 5
        while #c.frames < n and h:wait(deadline, function(v) assert.equal(c, v) end) do end
      end
      assert(far:send(wire.encode({ op = "x" }) .. body:sub(1, 10))) -- a frame and a part of one
      wait_frames(1)
      assert(far:send(body:sub(11)))
      wait_frames(2)
      assert.same({ op = "x" }, c.frames[1])
      assert.same({ op = "route", seq = 3, raw = true, v = { m = { { 1, "a" } } } }, c.frames[2])
      far:close()
      while not c.closed and h:wait(socket.gettime() + 5, function() end) do end
      assert.equal("connection closed", c.closed)
      h:close()
    end
  end)
end)
