-- Run on node 1 of `tools/rxe-vm --nodes 3 --slurm` (tools/run-tests): the
-- rendezvous' door under a real Slurm 22.05.  Two steps of one job at once on
-- the same three nodes, each rank 0 on node1, under --mpi=none (ports from the
-- step's ids, munge credentials) and under --mpi=pmix (a port the kernel
-- picks, a secret through PMIx): both pass.  (Each step joins, gathers and
-- meets at a barrier: the rendezvous is the tools' own, and their traffic
-- is the other specs'.)  A hello recorded from a real
-- rank of one step, replayed by another user to the next step's rank 0 while
-- that step's rank 2 starts late: the step passes, the stranger refused and
-- named.  Each spec's time goes to .cache/slurm-times.log.
local support = require "support"

local TIMES = ".cache/slurm-times.log"
local IBVLUA = "build/lua5.4/ibvlua"

local run = support.run_clean

local it = support.timed(it, TIMES) -- each case's time in TIMES

-- A step's script: the rendezvous, an allgather and a barrier; each rank prints
-- "joined <rank> <ranks seen> <port>" and rank 0 how the rendezvous was guarded.
local JOIN = [[
local f = assert(require("ibverbs.fabric").init{ timeout = 60 })
local all = assert(f:allgather(f.rank))
assert(f:barrier())
print(("joined %d %d %d"):format(f.rank, #all, f.port))
if f.rank == 0 then
  local what, strangers = f:door()
  print("rendezvous: " .. what)
  for _, line in ipairs(strangers) do print("stranger dropped: " .. line) end
end
f:close()
]]

-- A rank that writes down the bytes of its hello as it sends them (rank 2), then joins as JOIN does.
local RECORD = [[
local wire = require "ibverbs.fabric.wire"
local send = wire.send_raw
wire.send_raw = function(sock, bytes, deadline)
  if os.getenv("SLURM_PROCID") == "2" and bytes:find('"hello"', 1, true) then
    local f = assert(io.open(".cache/door-hello", "wb"))
    f:write(bytes)
    f:close()
  end
  return send(sock, bytes, deadline)
end
]] .. JOIN

-- A stranger: sends the recorded hello to the port given (arg) the moment
-- it connects, before any challenge (a replay needs none: under PMIx rank 0
-- accepts only once the late rank has met the others at PMIx's fence, and
-- the hello then waits in the connection, read first), then names the port
-- if its listener challenged it.
local REPLAY = [[
local socket = require "socket"
local f = assert(io.open(".cache/door-hello", "rb"))
local hello = f:read("a")
f:close()
local conns, said = {}, {}
for _, port in ipairs(arg) do
  local c, err
  for _ = 1, 50 do -- (connecting until the listener takes it: 10 s at most)
    c, err = socket.connect("127.0.0.1", tonumber(port))
    if c then break end
    socket.sleep(0.2)
  end
  if c then c:send(hello); conns[port] = c else said[#said + 1] = port .. ": " .. tostring(err) end
end
for port, c in pairs(conns) do
  c:settimeout(20)
  local head, err = c:receive(8)
  local body = head and head:match("^%x+$") and c:receive(tonumber(head, 16))
  if body and body:find('"challenge"', 1, true) then
    socket.sleep(2)
    print("replayed to " .. port)
    os.exit(0)
  end
  said[#said + 1] = port .. ": " .. tostring(head or err)
  c:close()
end
print("no listener challenged: " .. table.concat(said, "; "))
os.exit(1)
]]

-- A script in .cache (shared by every node), its path.
local function script(name, text)
  local path = ".cache/" .. name
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  os.execute("chmod 644 " .. path)
  return path
end

-- One step's lines of the output (its tag: "A" or "B"): every rank joined, and the text.
local function passed(out, tag)
  local text = out:match("== " .. tag .. "\n(.-)== end " .. tag) or ""
  local n = 0
  for _ in text:gmatch("joined %d 3 %d+") do n = n + 1 end
  return n == 3, text
end

for _, mpi in ipairs({ "none", "pmix" }) do
  local door = mpi == "none" and "munge credentials" or "a secret rank 0 put through PMIx"

  it(string.format("--mpi=%s: two steps of one job at once, both rank 0s on node1, both pass (%s)", mpi, door),
    function()
      local step = string.format("srun --overlap --mpi=%s -N 3 --ntasks-per-node=1 %s %s", mpi, IBVLUA,
        script("door-join.lua", JOIN))
      local out, rc = run(string.format("salloc -N 3 sh -c '(%s > /tmp/door-A 2>&1; echo rc=$? >> /tmp/door-A) & "
        .. "(%s > /tmp/door-B 2>&1; echo rc=$? >> /tmp/door-B) & wait; "
        .. "echo == A; cat /tmp/door-A; echo == end A; echo == B; cat /tmp/door-B; echo == end B'", step, step), 240)
      assert.equal(0, rc, out)
      local ports = {}
      for _, tag in ipairs({ "A", "B" }) do
        local ok, text = passed(out, tag)
        assert.is_true(ok, out)
        assert.matches("rc=0", text)
        assert.matches("rendezvous: authenticated: " .. door:gsub("%p", "%%%0"), text)
        ports[#ports + 1] = text:match("joined 0 3 (%d+)")
      end
      assert.are_not.equal(ports[1], ports[2]) -- (both rank 0s on node1 at once)
    end)

  it(string.format("--mpi=%s: a recorded hello replayed by another user while rank 2 starts late: refused, named, "
    .. "the step passes", mpi), function()
    os.remove(".cache/door-hello")
    -- a real rank 2 of one step writes down the bytes of its hello as it sends them
    local out, rc = run(string.format("srun --mpi=%s -N 3 --ntasks-per-node=1 %s %s", mpi, IBVLUA,
      script("door-record.lua", RECORD)), 180)
    assert.equal(0, rc, out)
    local hello = assert(support.slurp(".cache/door-hello"), "no hello recorded: " .. out)
    os.execute("chmod 644 .cache/door-hello")
    -- the next step: rank 2 five seconds late; the recorded hello sent to its rank 0 by nobody meanwhile (the
    -- step's port given, so the stranger knows where: the port the kernel or the step's ids pick is the other
    -- spec's)
    local port = 24000 + math.random(0, 3999)
    local p = io.popen(string.format("env -u LUA_PATH -u LUA_CPATH IBV_FABRIC_PORT=%d timeout 180 srun --mpi=%s -N 3 "
      .. "--ntasks-per-node=1 sh -c 'if [ $SLURM_PROCID = 2 ]; then sleep 5; fi; exec %s %s' 2>&1; echo rc=$?", port,
      mpi, IBVLUA, script("door-join.lua", JOIN)))
    local ports = { port }
    local rout, rrc = run(string.format("setpriv --reuid=65534 --regid=65534 --clear-groups lua5.4 %s %s",
      script("door-replay.lua", REPLAY), table.concat(ports, " ")), 60)
    assert.equal(0, rrc, rout)
    assert.matches("replayed to %d+", rout)
    out = p:read("a")
    p:close()
    assert.matches("rc=0", out)
    for r = 0, 2 do assert.matches("joined " .. r .. " 3 %d+", out) end
    assert.matches("rendezvous: authenticated: " .. door:gsub("%p", "%%%0"), out)
    -- the stranger: its hello proves another nonce (and, under munge, a credential decoded before)
    assert.matches("stranger dropped: 127%.0%.0%.1:%d+: [^\n]*%(it claims rank 2%)", out)
    assert.not_matches("stranger dropped: [^\n]*every rank had arrived", out)
    assert.is_true(#hello > 8)
  end)
end
