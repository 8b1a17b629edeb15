-- ibverbs.cm against rdma-core's own rdma_cm tools on rxe0, in both roles:
-- rping against examples/rping.lua (RDMA read/write ping-pong), and rdma_server /
-- rdma_client (synchronous calls, one 16-byte send each way, spec/cm/rdma_peer.lua).
-- Every process runs under timeout; a peer that fails or hangs fails the spec.
local support = require "support"

local ADDR = "192.0.2.1"
local LUA = jit and "luajit" or "lua5.4"
local next_port = 7800
local function port()
  next_port = next_port + 1
  return next_port
end

-- Starts cmd (under timeout, stderr into stdout); its output ends with "rc=N".
local function start(cmd)
  return assert(io.popen("sh -c 'timeout 30 " .. cmd .. " 2>&1; echo rc=$?'"))
end

-- The rest of p's output as lines, and the exit status.
local function finish(p)
  local lines = {}
  for l in p:lines() do lines[#lines + 1] = l end
  p:close()
  local rc = tonumber(table.remove(lines):match("^rc=(%d+)$"))
  return lines, rc
end

local function grep(lines, pattern)
  local out = {}
  for _, l in ipairs(lines) do
    if l:find(pattern) then out[#out + 1] = l end
  end
  return out
end

local function peer(script, args)
  return start(LUA .. " spec/cm/" .. script .. " " .. args)
end

local function rping_lua(args)
  return start(LUA .. " examples/rping.lua " .. args)
end

-- rping's first ping of 64 bytes: the header, then 50 characters from 'A' on.
local PING0 = "rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr"

describe("on rxe0, examples/rping.lua interoperates with rping", function()
  it("as the client: rping -s -v -C 3 prints the three pings the Lua client wrote, byte for byte", function()
    local p = port()
    local server = start("rping -s -a " .. ADDR .. " -p " .. p .. " -v -C 3")
    assert.is_true(support.wait_cm_listen(p, 20), "rping -s never listened")
    local client = rping_lua("-c -a " .. ADDR .. " -p " .. p .. " -v -V -C 3")
    local cl, crc = finish(client)
    local sl, src = finish(server)
    assert.equal(0, crc, table.concat(cl, "\n") .. "\n-- rping -s:\n" .. table.concat(sl, "\n"))
    assert.equal(0, src, table.concat(sl, "\n"))
    local pings = grep(sl, "^server ping data: ")
    assert.equal(3, #pings, table.concat(sl, "\n"))
    assert.equal("server ping data: " .. PING0, pings[1])
    local mine = grep(cl, "^ping data: ")
    assert.equal(3, #mine, table.concat(cl, "\n"))
    for i = 0, 2 do
      assert.matches("^server ping data: rdma%-ping%-" .. i .. ": [A-z]+$", pings[i + 1])
      assert.equal(#PING0, #pings[i + 1] - #"server ping data: ")
      assert.equal(pings[i + 1]:sub(8), mine[i + 1])
    end
    assert.same({}, grep(cl, "mismatch"))
    assert.same({ "client DISCONNECT EVENT..." }, grep(cl, "DISCONNECT"))
    assert.same({ "server DISCONNECT EVENT..." }, grep(sl, "DISCONNECT"))
  end)

  it("as the server: validates (-V) the three pings of rping -c -V, which validates them back", function()
    local p = port()
    local server = rping_lua("-s -a " .. ADDR .. " -p " .. p .. " -v -V")
    assert.is_true(support.wait_cm_listen(p, 20), "rping.lua -s never listened")
    local client = start("rping -c -a " .. ADDR .. " -p " .. p .. " -v -V -C 3")
    local cl, crc = finish(client)
    local sl, src = finish(server)
    -- (rping's own race: its cm thread may read the event channel its main thread has just destroyed once the
    -- disconnect came, and exits 255 saying so; seen once in a loaded make test: everything before it counts)
    local raced = crc == 255 and cl[#cl] == "rdma_get_cm_event: Bad file descriptor" and
      grep(cl, "DISCONNECT")[1] == "client DISCONNECT EVENT..."
    assert.is_true(crc == 0 or raced, table.concat(cl, "\n") .. "\n-- rping.lua -s:\n" .. table.concat(sl, "\n"))
    assert.equal(0, src, table.concat(sl, "\n"))
    local pings = grep(cl, "^ping data: ")
    assert.equal(3, #pings, table.concat(cl, "\n"))
    assert.same({}, grep(cl, "mismatch"))
    assert.same({}, grep(sl, "mismatch"))
    assert.equal("ping data: " .. PING0, pings[1])
    local served = grep(sl, "^server ping data: ")
    assert.equal(3, #served, table.concat(sl, "\n"))
    for i = 0, 2 do
      assert.matches("^ping data: rdma%-ping%-" .. i .. ": ", pings[i + 1])
      assert.equal("server " .. pings[i + 1], served[i + 1])
    end
    assert.same({ "server DISCONNECT EVENT..." }, grep(sl, "DISCONNECT"))
  end)

  it("as the server with -d: prints rping's debug lines for the listen, the request and each transfer", function()
    local p = port()
    local server = rping_lua("-s -d -a " .. ADDR .. " -p " .. p)
    assert.is_true(support.wait_cm_listen(p, 20), "rping.lua -s never listened")
    local client = start("rping -c -a " .. ADDR .. " -p " .. p .. " -S 100 -C 2")
    local cl, crc = finish(client)
    local sl, src = finish(server)
    assert.equal(0, crc, table.concat(cl, "\n") .. "\n-- rping.lua -s -d:\n" .. table.concat(sl, "\n"))
    assert.equal(0, src, table.concat(sl, "\n"))
    assert.equal(1, #grep(sl, "^rdma_listen$"))
    assert.equal(1, #grep(sl, "^cma_event type RDMA_CM_EVENT_CONNECT_REQUEST "))
    assert.equal(2, #grep(sl, "^rdma read completion$"))
    assert.equal(2, #grep(sl, "^server rdma write complete$"))
    -- the client's source and sink adverts: 100 bytes each
    assert.equal(4, #grep(sl, "^Received rkey %x+ addr %x+ len 100 from peer$"))
    assert.same({}, grep(sl, "^server ping data: "))
  end)
end)

describe("on rxe0, ibverbs.cm interoperates with rdma_server and rdma_client", function()
  it("as the client of rdma_server: one 16-byte message each way, then both disconnect", function()
    local p = port()
    local server = start("rdma_server -s " .. ADDR .. " -p " .. p)
    local client = peer("rdma_peer.lua", "client " .. ADDR .. " " .. p)
    local cl, crc = finish(client)
    local sl, src = finish(server)
    assert.equal(0, crc, table.concat(cl, "\n") .. "\n-- peer:\n" .. table.concat(sl, "\n"))
    assert.equal(0, src, table.concat(sl, "\n"))
    assert.same({"rdma_server: start", "rdma_server: end 0"}, sl)
    assert.equal(1, #grep(cl, "^got %x+$"))
    assert.equal("done disconnected", cl[#cl])
  end)

  it("as the server of rdma_client: receives its message, answers, and disconnects", function()
    local p = port()
    local server = peer("rdma_peer.lua", "server " .. ADDR .. " " .. p)
    assert.equal("ready", server:read("l"))
    local client = start("rdma_client -s " .. ADDR .. " -p " .. p)
    local cl, crc = finish(client)
    local sl, src = finish(server)
    assert.equal(0, crc, table.concat(cl, "\n") .. "\n-- peer:\n" .. table.concat(sl, "\n"))
    assert.equal(0, src, table.concat(sl, "\n"))
    assert.same({"rdma_client: start", "rdma_client: end 0"}, cl)
    assert.equal(1, #grep(sl, "^got %x+$"))
    assert.equal("done disconnected", sl[#sl])
  end)
end)
