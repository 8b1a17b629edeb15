-- ibverbs.fabric.hub: rank 0 with more ranks than FD_SETSIZE (epoll through
-- lua-luv), the refusal of such a group without lua-luv, and the wait of a
-- member on its two sockets.
local fs = require "fabric_support"
local free_port, LUA, CPATH = fs.free_port, fs.LUA, fs.CPATH

-- Ranks 1 .. n-1 played by one process (the wire protocol by hand: an 8-digit
-- hex length, then dkjson), so that rank 0 meets more ranks than select() can
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
  assert(c:send(frame{ hello = "ibverbs.fabric", rank = r, size = n, host = "m" .. r }))
  socks[r] = c
end
for r = 1, n - 1 do assert(read(socks[r]).welcome) end
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
