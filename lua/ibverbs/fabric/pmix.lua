--- ibverbs.fabric's wire-up through PMIx, when the launcher serves it (srun
-- --mpi=pmix, Open MPI's mpirun, prterun): rank, size, local rank and host
-- names come from the job's PMIx data, rank 0's address from its put, and a
-- fence is the rendezvous; allgather and alltoall of groups that are not
-- tolerant go through put, commit, a collecting fence and get.  The TCP
-- connections to rank 0 stay for the other collectives and route (a fence
-- per round would be a launcher-wide collective per round).
--
-- Chosen by fabric.init: wireup = "auto" (IBV_FABRIC_WIREUP; the default)
-- takes PMIx when PMIX_RANK is set, no rank or size was given, and ibv.pmix
-- loads libpmix and PMIx_Init succeeds; else TCP, saying why in f.wireup_note.
-- "pmix" fails when PMIx cannot be had, "tcp" never tries.
--
-- A fence never outlasts its limit (ibv.pmix waits on PMIx_Fence_nb, in every
-- PMIx series alike); then rank 0 asks every rank's key of that fence for a few
-- seconds (pmix.PROBE): the ranks that never put it are named, and rank 0
-- sends the others that message over TCP, as the TCP rendezvous does.
local socket = require "socket"
local wire = require "ibverbs.fabric.wire"
local ranks = require "ibverbs.fabric.ranks"

local pmix = {}

--- Seconds rank 0 waits for the ranks' keys after a fence failed (naming the missing ones).
pmix.PROBE = 5
local HELLO = "ibvl.fabric.hello"

local function encode(v)
  local frame, err = wire.encode({ v = v })
  if not frame then return nil, err end
  return frame:sub(9) -- the JSON, without the frame's length
end

local function decode(s)
  local msg, err = wire.decode(s)
  if not msg then return nil, err end
  return msg.v, nil
end

--- The PMIx client and the job's facts ({client, rank, size, local_rank, local_size,
-- node_id, version}), false (TCP) with why, or nil, msg when wireup forces PMIx and it fails.
-- opts: wireup, pmix_lib (IBV_FABRIC_PMIX_LIB), rank/size (given: TCP unless forced).
function pmix.open(opts, getenv)
  local mode = opts.wireup or getenv("IBV_FABRIC_WIREUP") or "auto"
  if mode ~= "auto" and mode ~= "pmix" and mode ~= "tcp" then
    return nil, "fabric: wireup must be auto, pmix or tcp, got " .. tostring(mode)
  end
  local function no(why)
    if mode == "pmix" then return nil, "fabric: wireup = pmix: " .. why end
    return false, why
  end
  if mode == "tcp" then return false, "wireup = tcp" end
  if mode == "auto" and (opts.rank or opts.size) then return false, "rank and size given" end
  if mode == "auto" and not getenv("PMIX_RANK") then return false, "no PMIX_RANK" end
  local ok, core = pcall(require, "ibverbs.core")
  if not ok or type(core) ~= "table" or not core.pmix then return no("ibverbs.core has no pmix") end
  local p, err = core.pmix{ lib = opts.pmix_lib or getenv("IBV_FABRIC_PMIX_LIB") }
  if not p then return no(err) end
  local info = p:info()
  local size, serr = p:get(nil, "pmix.job.size", 30)
  if type(size) ~= "number" or size < 1 then
    p:close()
    return no("the job's size: " .. tostring(serr or size))
  end
  local lrank = p:get(info.rank, "pmix.lrank", 10)
  local lsize = p:get(nil, "pmix.local.size", 10)
  local node = p:get(info.rank, "pmix.nodeid", 10)
  local host = p:get(info.rank, "pmix.hname", 10)
  return { client = p, rank = info.rank, size = size, version = info.version,
    host = type(host) == "string" and host ~= "" and host or nil,
    local_rank = type(lrank) == "number" and lrank or nil, local_size = type(lsize) == "number" and lsize or nil,
    node_id = type(node) == "number" and node or nil }
end

--- Host names from PMIx into self.hosts (rank 0: every rank's; the others: rank 0's), where PMIx has them.
function pmix.hosts(self)
  local list = {}
  if self.rank == 0 then
    for r = 1, self.size - 1 do list[#list + 1] = r end
  else
    list[1] = 0
  end
  local got = self.pm.client:get_all("pmix.hname", list, 10)
  for i, r in ipairs(list) do
    if type(got[i]) == "string" and got[i] ~= "" then self.hosts[r + 1] = got[i] end
  end
end

-- This host's IPv4 addresses but loopback: its name's, then the kernel's local ones (/proc/net/fib_trie).
local function addresses(host)
  local out, seen = {}, {}
  local function add(a)
    if a and not seen[a] and not a:find("^127%.") then seen[a] = true; out[#out + 1] = a end
  end
  local _, resolved = socket.dns.toip(host)
  for _, a in ipairs(type(resolved) == "table" and resolved.ip or {}) do add(a) end
  local fh = io.open("/proc/net/fib_trie")
  if fh then
    local last
    for line in fh:lines() do
      local a = line:match("|%-%- (%d+%.%d+%.%d+%.%d+)$")
      if a then last = a elseif line:find("/32 host LOCAL") then add(last) end
    end
    fh:close()
  end
  out[#out + 1] = host -- last: whatever the others' resolver says
  return out
end

--- Rank 0's address candidates (all ranks on its node: loopback).
function pmix.root_addresses(self)
  if self.pm.local_size == self.size then return { "127.0.0.1" } end
  return addresses(self.host)
end

--- A connection to one of addrs at port (each tried in turn, a few seconds each), or nil, err.
function pmix.connect(addrs, port, deadline)
  local err
  for _, a in ipairs(addrs) do
    local left = deadline - socket.gettime()
    if left <= 0 then break end
    local sock = socket.tcp()
    sock:settimeout(math.min(left, 3))
    local ok, cerr = sock:connect(a, port)
    if ok then sock:settimeout(nil); return sock end
    err = a .. ": " .. tostring(cerr)
    sock:close()
  end
  return nil, err or "no address"
end

-- Rank 0 after a fence that failed: the ranks of list whose key is not there (named), or nil.
local function missing_ranks(self, key)
  local list = {}
  for r = 1, self.size - 1 do list[#list + 1] = r end
  local _, missing = self.pm.client:get_all(key, list, pmix.PROBE)
  if #missing == 0 then return nil end
  table.sort(missing)
  return missing
end

--- The rendezvous' PMIx part: every rank puts its hello (rank 0: where it
-- listens), commits and meets the others at a collecting fence within the limit.  Rank
-- 0 returns true, or nil and what it found for the TCP part to tell everyone
-- ({fail = msg, missing = {[rank] = true}, n = count}; a tolerant group buries
-- the missing instead of failing); another rank returns true once it knows
-- where rank 0 listens (self.root_addrs, self.port), or nil, msg.
function pmix.rendezvous(self, deadline)
  local p = self.pm.client
  local hello = { host = self.host }
  if self.rank == 0 then hello.port, hello.addrs = self.port, pmix.root_addresses(self) end
  local limit = self.init_timeout
  local body, ok, err = encode(hello)
  if body then ok, err = p:put(HELLO, body) end
  if ok then ok, err = p:commit() end
  -- collecting: under Slurm 22.05 a fence that collects nothing completes without a rank that never joined it
  if ok then ok, err = p:fence{ collect = true, timeout = math.max(0, deadline - socket.gettime()) } end
  if self.rank == 0 then
    if ok then return true end
    local pre, missing = { missing = {}, n = 0 }, missing_ranks(self, HELLO)
    if not missing then
      pre.fail = "the PMIx fence of the rendezvous failed: " .. tostring(err)
      return nil, pre
    end
    local why = string.format("did not arrive at the rendezvous (PMIx fence) within %g s", limit)
    for _, r in ipairs(missing) do
      pre.missing[r], pre.n = true, pre.n + 1
      if self.tolerant then ranks.bury(self, r, ranks.name(self, r) .. " " .. why) end
    end
    if not self.tolerant then pre.fail = ranks.names(self, missing) .. " " .. why end
    return nil, pre
  end
  -- (after a fence that failed, rank 0's hello may be there all the same: rank 0 then names who is missing)
  -- (a launcher may complete a fence without a rank that died: Slurm 22.05 does; the get waits no longer than
  -- the rendezvous' limit)
  local h, herr = p:get(0, HELLO, ok and math.max(pmix.PROBE, deadline - socket.gettime()) or pmix.PROBE)
  local v = h and decode(h)
  if type(v) ~= "table" or not tonumber(v.port) then
    return nil, string.format("%s did not arrive at the rendezvous (PMIx fence) within %g s (%s)",
      ranks.name(self, 0), limit, tostring(err or herr))
  end
  if not ok then self.pm.late = pmix.PROBE end -- rank 0 looks at the keys before it listens
  if self.explicit_root then return true end -- opts.root or IBV_FABRIC_ROOT wins
  self.root_addrs, self.port = v.addrs, math.floor(v.port)
  self.root = table.concat(v.addrs or {}, ",")
  return true
end

local function all_ranks(self)
  if not self.pm.all then
    local l = {}
    for r = 0, self.size - 1 do l[r + 1] = r end
    self.pm.all = l
  end
  return self.pm.all
end

--- One collective through PMIx: value put under the collective's number, a
-- collecting fence within the limit, every rank's value read.  The values
-- (indexed rank + 1), or nil, msg; after a failed fence rank 0 names the
-- ranks that did not arrive and sends every rank that message over TCP.
function pmix.exchange(self, op, value, deadline, timeout)
  local p = self.pm.client
  local key = "ibvl.fabric." .. self.seq
  local body, ok, err = encode(value)
  if body then ok, err = p:put(key, body) end
  if ok then ok, err = p:commit() end
  if ok then ok, err = p:fence{ collect = true, timeout = math.max(0, deadline - socket.gettime()) } end
  if ok then
    local got, missing, why = p:get_all(key, all_ranks(self), math.max(pmix.PROBE, deadline - socket.gettime()))
    if #missing == 0 then
      local values = {}
      for r = 1, self.size do
        local v, derr = decode(got[r])
        if derr then
          return nil, string.format("%s #%d: %s's value: %s", op, self.seq, ranks.name(self, r - 1), derr)
        end
        values[r] = v
      end
      return values
    end
    err = ranks.name(self, missing[1]) .. "'s value: " .. tostring(why[missing[1]])
  end
  local msg = string.format("%s #%d: %s", op, self.seq, tostring(err))
  if self.rank == 0 then
    local missing = missing_ranks(self, key)
    if missing then
      msg = string.format("%s did not arrive at %s #%d within %g s (PMIx fence)", ranks.names(self, missing), op,
        self.seq, timeout)
    end
    for _, c in pairs(self.peers) do wire.send(c.sock, { err = msg }, socket.gettime() + 5) end
    return nil, msg
  end
  local said, rerr = wire.read(self.up, socket.gettime() + pmix.PROBE + 10)
  if said and said.err then return nil, said.err end
  return nil, msg .. "; no word from rank 0 (" .. wire.said(rerr) .. ")"
end

return pmix
