--- The door of ibverbs.fabric: who may join a run, and what becomes of a
-- stranger.
--
--   local lock = assert(door.lock(opts, getenv, run))   -- how this run's hellos prove themselves
--   door.challenge(c, lock)                  -- rank 0 or a relay, at accept: a fresh nonce sent
--   local proof = assert(door.answer(sock, lock, deadline, "hello", who))  -- the rank: read it, prove
--   local ok, why = door.check(c, lock, hello, "hello", who)                -- rank 0: the proof checked
--   door.stranger(self, c, why)              -- dropped and named (f:strangers())
--
-- Every listener of a run (rank 0's, each relay's) sends a connection a
-- challenge the moment it accepts it: a fresh random nonce and the run's
-- name.  The connecting rank answers with its hello, which carries
-- HMAC-SHA256(key, what it claims, the nonce) and a nonce of its own; rank
-- 0's welcome answers that nonce the same way, so a rank knows it reached
-- its own run's rank 0 (not another run's on the same port, nor a process
-- squatting on it).  A recorded hello is worth nothing: the next connection
-- gets another nonce.
--
-- The key, in order: a key the user gives every rank (opts.key,
-- IBV_FABRIC_KEY, or the file IBV_FABRIC_KEY_FILE names), else the run's
-- secret that rank 0 puts through PMIx and every rank gets (the launcher
-- vouches for who can read it; set by ibverbs.fabric.pmix).  Under Slurm
-- without PMIx and without a key, the proofs are munge credentials instead
-- (ibv.munge_encode: the cluster's own authentication, which Slurm uses):
-- each binds the user, the run (job and step), the rank and the nonce, and
-- is decoded by rank 0 (the socket: IBV_FABRIC_MUNGE_SOCKET, else munged's).
-- Else none: the rendezvous is then not authenticated, and the tools'
-- reports say so.
--
-- Before its hello is taken a connection is a stranger: its frames are
-- bounded (door.HELLO_MAX bytes), it must speak within door.SILENT seconds,
-- and all strangers together may hold door.BUDGET bytes at rank 0; one that
-- breaks a rule, sends what is not a hello of this run, claims a rank out of
-- range or taken, or proves nothing is dropped and named, never failing the
-- run.
local socket = require "socket"
local wire = require "ibverbs.fabric.wire"

local door = {}

door.HELLO_MAX = 16384 -- bytes of a frame before the hello is taken
door.SILENT = 5 -- seconds a connection may stay silent before its hello
door.BUDGET = 4 * 1024 * 1024 -- bytes all strangers may hold at once
door.KEPT = 32 -- strangers named one by one; the rest are counted
door.KEY_MIN = 16 -- bytes a key the user gives must have at least

-- n random bytes as 2n hex digits, or nil, msg
local function random_hex(n)
  local f = io.open("/dev/urandom", "rb")
  local b = f and f:read(n)
  if f then f:close() end
  if not b or #b ~= n then return nil, "cannot read /dev/urandom" end
  return (b:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end
door.random_hex = random_hex

local ibv -- ibverbs, loaded when a proof is first made (the control plane runs without ibverbs.core)
local function core()
  ibv = ibv or require "ibverbs"
  return ibv
end

-- what a proof binds: the fabric, its kind (hello, member, relay, welcome), the run, a nonce, who
local function claim(...) return table.concat({ "ibverbs.fabric", ... }, "\n") end

-- this side's proof of the claim: an HMAC with the key, or a munge credential of it
local function prove(lock, ...)
  if lock.method == "munge" then return core().munge_encode(claim(...), lock.socket) or "" end
  if lock.key then return core().hmac_sha256(lock.key, claim(...), true) end
  return ""
end

-- whether proof proves the claim: true, or nil, why
local function verify(lock, proof, ...)
  if lock.method == "munge" then
    local payload, uid, _, mine = core().munge_decode(proof, lock.socket)
    if not payload then return nil, "its munge credential: " .. tostring(uid) end
    if not mine then return nil, "a munge credential of another user (uid " .. tostring(uid) .. ")" end
    if payload ~= claim(...) then return nil, "a munge credential for another claim" end
    return true
  end
  if proof ~= core().hmac_sha256(lock.key, claim(...), true) then return nil, "a wrong proof" end
  return true
end

-- the key the user gave (opts.key, IBV_FABRIC_KEY, IBV_FABRIC_KEY_FILE): key, where it came from; nil; or nil, msg
local function user_key(opts, getenv)
  local key, from = opts.key, "the key option"
  if key == nil and getenv("IBV_FABRIC_KEY") then key, from = getenv("IBV_FABRIC_KEY"), "IBV_FABRIC_KEY" end
  local file = key == nil and getenv("IBV_FABRIC_KEY_FILE")
  if file then
    local f, err = io.open(file, "rb")
    if not f then return nil, "fabric: IBV_FABRIC_KEY_FILE: cannot read " .. tostring(err) end
    key, from = f:read("a"), "IBV_FABRIC_KEY_FILE=" .. file
    f:close()
    key = key and key:gsub("%s+$", "")
  end
  if key == nil then return nil end
  if type(key) ~= "string" or #key < door.KEY_MIN then
    return nil, string.format("fabric: the key from %s has %s bytes: at least %d", from,
      type(key) == "string" and #key or "no", door.KEY_MIN)
  end
  return key, from
end

--- How this run's hellos prove they belong to it: {method = "key" | "pmix" |
-- "munge" | "none", key, run, what (a line for a report)}, or nil, msg (a key given
-- but unreadable or too short).  run names the run (every rank alike: a job
-- and step, or ""); under PMIx the key comes later (door.use_secret).
function door.lock(opts, getenv, run)
  local key, from = user_key(opts, getenv)
  if key == nil and from then return nil, from end
  local lock = { run = run or "", strangers = {}, count = 0, socket = getenv("IBV_FABRIC_MUNGE_SOCKET") }
  if key then
    lock.method, lock.key, lock.what = "key", key, "authenticated: a key the user gave (" .. from .. ")"
    return lock
  end
  lock.method, lock.what = "none", "NOT authenticated: no launcher vouches for the ranks and no key was given "
    .. "(IBV_FABRIC_KEY_FILE)"
  if lock.run:find("^slurm ") and not getenv("PMIX_NAMESPACE") then -- Slurm without PMIx: munge, when it answers
    local ok, cred, err = pcall(function() return core().munge_encode("ibverbs.fabric probe", lock.socket) end)
    if ok and cred then
      lock.method, lock.what = "munge", "authenticated: munge credentials (the user, the job and step, the rank)"
    else
      lock.what = "NOT authenticated: Slurm without PMIx, and munge does not answer (" ..
        tostring(ok and err or cred) .. "); give a key (IBV_FABRIC_KEY_FILE)"
    end
  end
  return lock
end

--- A secret for a run made by rank 0 (to put through PMIx), or nil, msg.
function door.new_secret() return random_hex(32) end

--- The lock takes the run's secret from PMIx, unless the user gave a key.
function door.use_secret(lock, secret)
  if lock.method == "key" or type(secret) ~= "string" or #secret < door.KEY_MIN then return end
  lock.method, lock.key, lock.what = "pmix", secret, "authenticated: a secret rank 0 put through PMIx"
end

--- At accept (rank 0, a relay): the connection's nonce sent with the run's
-- name; its clock starts (door.SILENT).
function door.challenge(c, lock)
  c.nonce = assert(random_hex(16))
  c.since, c.max, c.cap = socket.gettime(), door.HELLO_MAX, door.HELLO_MAX + 8
  c.peer = c.peer or (function()
    local ip, port = c.sock:getpeername()
    return ip and (ip .. ":" .. tostring(port)) or "?"
  end)()
  wire.send(c.sock, { challenge = c.nonce, run = lock.run }, socket.gettime() + 1)
  c.sock:settimeout(0) -- (the hub reads without blocking)
end

--- The connecting side: the listener's challenge read, this side's proof
-- made.  Returns the fields to add to the hello ({proof, nonce}), or nil,
-- msg ("another run": the listener belongs to another run).
function door.answer(sock, lock, deadline, kind, who)
  local ch, err = wire.read(sock, deadline, door.HELLO_MAX)
  if not ch then return nil, "no challenge: " .. wire.said(err) end
  if type(ch.challenge) ~= "string" or #ch.challenge < 16 then return nil, "no challenge: not a listener of ours" end
  if ch.run ~= lock.run then
    return nil, string.format("another run listens there (%s, this run is %s)", tostring(ch.run), lock.run)
  end
  local mine = assert(random_hex(16))
  return { proof = prove(lock, kind, lock.run, ch.challenge, who), nonce = mine }
end

--- Whether hello (kind, claiming who) proves it belongs to this run: true,
-- or nil, why.
function door.check(c, lock, hello, kind, who)
  if lock.method == "none" then return true end
  if type(hello.proof) ~= "string" or hello.proof == "" then return nil, "no proof of the run's key" end
  return verify(lock, hello.proof, kind, lock.run, c.nonce, who)
end

--- Rank 0's proof for a rank's welcome: over the nonce the rank sent (hello.nonce).
function door.vouch(lock, hello, who)
  if lock.method == "none" or type(hello.nonce) ~= "string" then return nil end
  return prove(lock, "welcome", lock.run, hello.nonce, who)
end

--- A rank: whether the welcome came from its run's rank 0 (its proof over our nonce).
function door.trusts(lock, welcome, mine, who)
  if lock.method == "none" then return true end
  return type(welcome.proof) == "string" and verify(lock, welcome.proof, "welcome", lock.run, mine.nonce, who)
    or false
end

--- A connection let in: its frames bounded by wire.MAX_FRAME alone, no clock.
function door.admit(c) c.since, c.max, c.cap = nil, nil, nil end

--- A stranger dropped: named in the lock's list (the first door.KEPT) and counted.
function door.stranger(lock, c, why)
  lock.count = lock.count + 1
  if #lock.strangers < door.KEPT then
    lock.strangers[#lock.strangers + 1] = { peer = c.peer or "?", why = why }
  end
end

-- ---------------------------------------------------------------- a listener's door

local Door = {}
Door.__index = Door

--- A listener's door (rank 0's, a relay's) on the hub h: every connection
-- it accepts is challenged and pending (d.pending) until its first frame is
-- taken or it is turned away.
function door.open(lock, h, listener)
  local d = setmetatable({ lock = lock, hub = h, pending = {} }, Door)
  h:listen(listener, function(c) d.pending[c] = true; door.challenge(c, lock) end)
  return d
end

--- A pending connection dropped and named (why).
function Door:turn_away(c, why)
  self.pending[c] = nil
  door.stranger(self.lock, c, why)
  self.hub:drop(c)
end

--- Waits until done() or deadline, giving each pending connection's first
-- frame to take(c, hello): nil lets it in, else why it is turned away; the
-- silent, the closed and those past the strangers' budget are turned away
-- on the way (door.sweep).  Then the listener is closed; what is still
-- pending is the caller's.
function Door:run(deadline, done, take)
  local pending = self.pending
  local function turn_away(c, why) self:turn_away(c, why) end
  local function visit(c)
    if not pending[c] then return end -- (a rank let in, a relay's link: their frames are the collectives')
    local hello = table.remove(c.frames, 1)
    if not hello then
      if c.closed then turn_away(c, "closed before its hello (" .. tostring(c.closed) .. ")") end
      return
    end
    local why = take(c, hello)
    if why then turn_away(c, why) else pending[c] = nil end
  end
  while not done() do
    local due = door.sweep(pending, turn_away, socket.gettime())
    if not self.hub:wait(math.min(deadline, due or deadline), visit) and socket.gettime() >= deadline then break end
  end
  self.hub:unlisten()
end

--- The strangers still waiting to speak: those silent past door.SILENT and,
-- while they hold more than door.BUDGET bytes together, the largest, are
-- dropped (drop(c, why) for each).  Returns the earliest time one falls
-- silent (for the caller's next wake-up), or nil.
function door.sweep(pending, drop, now)
  local held, next_due, big = 0, nil, {}
  for c in pairs(pending) do
    if c.since and now - c.since >= door.SILENT then
      drop(c, string.format("silent for %g s before its hello", door.SILENT))
    else
      held = held + #c.buf
      big[#big + 1] = c
      if c.since then next_due = math.min(next_due or math.huge, c.since + door.SILENT) end
    end
  end
  if held > door.BUDGET then
    table.sort(big, function(a, b) return #a.buf > #b.buf end)
    for _, c in ipairs(big) do
      if held <= door.BUDGET then break end
      held = held - #c.buf
      drop(c, "held too many bytes before its hello")
    end
  end
  return next_due
end

--- The strangers of a lock as lines for a report: the first door.KEPT, then how many more.
function door.lines(lock)
  local out = {}
  for _, s in ipairs(lock.strangers) do out[#out + 1] = s.peer .. ": " .. s.why end
  if lock.count > #lock.strangers then out[#out + 1] = (lock.count - #lock.strangers) .. " more" end
  return out
end

return door
