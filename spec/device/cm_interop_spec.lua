-- ibverbs.cm against rdma-core's own rdma_cm tools on rxe0, in both roles:
-- rping (RDMA read/write ping-pong, spec/cm/rping_peer.lua) and rdma_server /
-- rdma_client (synchronous calls, one 16-byte send each way, spec/cm/rdma_peer.lua).
-- Every process runs under timeout; a peer that fails or hangs fails the spec.
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

describe("on rxe0, ibverbs.cm interoperates with rping", function()
  it("as the client: rping -s reads and writes three pings from the Lua side", function()
    local p = port()
    local server = start("rping -s -a " .. ADDR .. " -p " .. p .. " -v -C 3")
    -- 64 bytes: rping's default size (its man page says 100)
    local client = peer("rping_peer.lua", "client " .. ADDR .. " " .. p .. " 3 64")
    local cl, crc = finish(client)
    local sl, src = finish(server)
    assert.equal(0, crc, table.concat(cl, "\n") .. "\n-- peer:\n" .. table.concat(sl, "\n"))
    assert.equal(0, src, table.concat(sl, "\n"))
    local pings = grep(sl, "^server ping data: ")
    assert.equal(3, #pings, table.concat(sl, "\n"))
    for i = 0, 2 do
      assert.matches("^server ping data: rdma%-ping%-" .. i .. ": [A-Z]+$", pings[i + 1])
      assert.equal(pings[i + 1]:sub(8), grep(cl, "^ping data: ")[i + 1])
    end
    assert.equal("done", cl[#cl])
  end)

  it("as the server: rping -c -V validates three pings the Lua side read and wrote back", function()
    local p = port()
    local server = peer("rping_peer.lua", "server " .. ADDR .. " " .. p .. " 3")
    assert.equal("ready", server:read("l"))
    local client = start("rping -c -a " .. ADDR .. " -p " .. p .. " -v -V -C 3")
    local cl, crc = finish(client)
    local sl, src = finish(server)
    assert.equal(0, crc, table.concat(cl, "\n") .. "\n-- peer:\n" .. table.concat(sl, "\n"))
    assert.equal(0, src, table.concat(sl, "\n"))
    local pings = grep(cl, "^ping data: ")
    assert.equal(3, #pings, table.concat(cl, "\n"))
    assert.same({}, grep(cl, "mismatch"))
    for i = 0, 2 do
      assert.matches("^ping data: rdma%-ping%-" .. i .. ": ", pings[i + 1])
      assert.equal("server " .. pings[i + 1], grep(sl, "^server ping data: ")[i + 1])
    end
    assert.equal("done", sl[#sl])
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
