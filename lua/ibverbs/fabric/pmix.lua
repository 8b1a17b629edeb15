--- ibverbs.fabric's wire-up through PMIx, when the launcher serves it (srun
-- --mpi=pmix, Open MPI's mpirun, prterun): rank, size, local rank and host
-- names come from the job's PMIx data, rank 0's and the relays' addresses
-- from their puts (a member reads its relay's, a relay those of the relays
-- it links to: never all of them), and a fence is the rendezvous; allgather
-- and alltoall of groups that are not
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
-- PMIx series alike), less the last few seconds of it (pmix.TCP_SHARE): the
-- TCP rendezvous follows the fence anyway, and an exchange whose fence gave
-- up runs over TCP in that time; either names the ranks that did not arrive
-- as the TCP path does (rank 0 holds a connection per rank: PMIx cannot tell
-- who is missing, and a server may hold every get while a collecting fence
-- is pending, as Slurm's did).
local socket = require "socket"
local wire = require "ibverbs.fabric.wire"
local ranks = require "ibverbs.fabric.ranks"
local door = require "ibverbs.fabric.door"

local pmix = {}

--- Seconds of a call's limit (at most half of it) left to the TCP part after a fence gave up: the TCP
-- rendezvous, or the same collective over TCP, which names the ranks that did not arrive.
pmix.TCP_SHARE = 5
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

--- This rank's address candidates, for rank 0 or a relay (all ranks on its node: loopback).
function pmix.own_addresses(self)
  if self.pm.local_size == self.size then return { "127.0.0.1" } end
  return addresses(self.host)
end

-- Where a fence of a call ending at deadline (limit seconds long) gives up: the rest of the limit, up to
-- pmix.TCP_SHARE seconds, is the TCP part's, which names whoever is missing.
local function fence_end(deadline, limit)
  return deadline - math.min(pmix.TCP_SHARE, limit / 2)
end

--- The rendezvous' PMIx part: every rank puts its hello (rank 0: where it
-- listens, on the port the kernel gave it unless the user named one, and the
-- run's secret, ibverbs.fabric.door's key), commits and meets the others at a fence (no data collected)
-- within the limit but the TCP part's share; the others then read rank 0's
-- hello.  The TCP rendezvous follows and names whoever did not arrive, as
-- without PMIx.  True (rank 0, or a rank that knows where rank 0 listens:
-- self.root, its addresses joined by commas, for hub.connect; self.port),
-- or nil, msg (rank 0's hello not there).
function pmix.rendezvous(self, deadline)
  local p = self.pm.client
  local hello = { host = self.host }
  local t = self.tree
  if self.rank == 0 then -- where it listens, and the run's secret (unless the user gave a key)
    hello.port, hello.addrs = self.port, pmix.own_addresses(self)
    if self.lock.method ~= "key" then
      hello.secret = door.new_secret()
      door.use_secret(self.lock, hello.secret)
    end
  end
  if t and t.listener then -- a relay: where its members and the relays above it connect
    hello.relay_port, hello.addrs = select(2, t.listener:getsockname()), pmix.own_addresses(self)
  end
  local limit = self.init_timeout
  local body, ok, err = encode(hello)
  if body then ok, err = p:put(HELLO, body) end
  if ok then ok, err = p:commit() end
  if ok then err = select(2, p:fence{ timeout = math.max(0, fence_end(deadline, limit) - socket.gettime()) }) end
  if self.rank == 0 then return true end -- (its put failed: the others say so)
  -- (Slurm 22.05 completes a fence that collects nothing without a rank that never joined it: the get waits
  -- for rank 0's commit, within the limit)
  local h, herr = p:get(0, HELLO, math.max(1, fence_end(deadline, limit) - socket.gettime()))
  local v = h and decode(h)
  if type(v) ~= "table" or not tonumber(v.port) then
    return nil, string.format("%s did not arrive at the rendezvous (PMIx fence) within %g s (%s)",
      ranks.name(self, 0), limit, tostring(err or herr))
  end
  door.use_secret(self.lock, v.secret)
  if t then pmix.relays(self, math.max(1, fence_end(deadline, limit) - socket.gettime())) end
  if #self.ports == 0 then self.port = math.floor(v.port); self.ports = { self.port } end -- (not the user's)
  if self.explicit_root then return true end -- opts.root or IBV_FABRIC_ROOT wins
  self.root = table.concat(v.addrs or {}, ",")
  return true
end

--- The relays' addresses this rank needs, from their hellos (a member: its
-- relay's; a relay: those of the relays below it, which it connects to)
-- into self.tree.addrs ("addr,addr,...:port" by group), and t.from_pmix set;
-- what PMIx lacks, rank 0's welcome gives (TCP).
function pmix.relays(self, timeout)
  local t = self.tree
  local g = ranks.group_of(t.k, self.rank)
  local list = {}
  if t.listener then
    for h = 1, g - 1 do list[h] = ranks.relay_of(t.k, h) end
  else
    list[1] = t.relay
  end
  local got = self.pm.client:get_all(HELLO, list, timeout)
  local all = true
  for i, r in ipairs(list) do
    local v = got[i] and decode(got[i])
    if type(v) == "table" and tonumber(v.relay_port) and type(v.addrs) == "table" and #v.addrs > 0 then
      t.addrs[tostring(ranks.group_of(t.k, r))] = table.concat(v.addrs, ",") .. ":" .. math.floor(v.relay_port)
    else
      all = false
    end
  end
  t.from_pmix = all
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
-- collecting fence within the limit but the TCP part's share, every rank's
-- value read.  The values (indexed rank + 1), or nil, msg: the caller then
-- runs the same collective over TCP until the deadline, which names the
-- ranks that did not arrive (or completes without PMIx), and the group
-- stays on TCP from then on.
function pmix.exchange(self, op, value, deadline, limit)
  local p = self.pm.client
  local key = "ibvl.fabric." .. self.seq
  local body, ok, err = encode(value)
  if body then ok, err = p:put(key, body) end
  if ok then ok, err = p:commit() end
  local stop = fence_end(deadline, limit)
  if ok then ok, err = p:fence{ collect = true, timeout = math.max(0, stop - socket.gettime()) } end
  if ok then
    local got, missing, why = p:get_all(key, all_ranks(self), math.max(1, stop - socket.gettime()))
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
  return nil, string.format("%s #%d through PMIx: %s", op, self.seq, tostring(err))
end

return pmix
