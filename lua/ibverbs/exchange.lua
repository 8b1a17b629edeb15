--- Out-of-band exchange of QP addresses over TCP, wire compatible with the
-- rdma-core example tools and with perftest.
--
--   local ex = require "ibverbs.exchange"
--   local conn = assert(ex.connect("10.0.0.2", 18515))   -- or ex.listen(18515)
--   -- ibv_*_pingpong: "%04x:%06x:%06x:%s" lid:qpn:psn:gid (32 hex), NUL-terminated
--   local remote = assert(ex.client_exchange(conn, { {lid = 0, qpn = n, psn = p, gid = g} }))
--   local remote = assert(ex.server_exchange(conn, 1, function(rem) ...; return mine end))
--   -- ibv_xsrq_pingpong: "%04x:%06x:%06x:%06x:%06x:%s" lid:recv_qpn:send_qpn:psn:srqn:gid, NUL
--   ex.send_xsrq_dest(conn, d), ex.recv_xsrq_dest(conn), ex.send_end(conn), ex.recv_end(conn)
--   local l = assert(ex.listener(18515, 4)); local conn = assert(l:accept()); l:close()
--   -- perftest: 16-byte versions, system data, MTU, then 108-byte keys
--   ex.xchg(conn, role, data), ex.pack_key(dest), ex.unpack_key(s)
--   local mtu = assert(ex.perftest_start(conn, 1024))  -- versions, system data, MTU
--   local peer = assert(ex.perftest_bw_reports(conn, {size =, iters =, bw_avg =, ...}, version))
--   ex.gid_raw("::ffff:192.0.2.1") -> 16 bytes; ex.gid_text(raw) -> "::ffff:192.0.2.1"
--
-- Every call returns nil, msg on a network error or a malformed message.
-- Timeouts: connecting 10 s, each read or write 60 s (ex.CONNECT_TIMEOUT,
-- ex.IO_TIMEOUT), accepting as given (nil: forever).  Sockets wait in slices
-- of 0.2 s, so the interpreter's SIGINT handler ("interrupted!") ends a wait
-- promptly.
local socket = require "socket"

local ex = {}

ex.CONNECT_TIMEOUT = 10
ex.IO_TIMEOUT = 60
local SLICE = 0.2

local function clock() return socket.gettime() end

-- ---------------------------------------------------------------- GIDs

--- 16 raw bytes from an IPv6 text GID (a 16-byte string passes unchanged).
function ex.gid_raw(text)
  if text == nil then return string.rep("\0", 16) end
  if #text == 16 and not text:find("^[%x:.]+$") then return text end
  local head, tail = text:match("^(.-)::(.*)$")
  local groups = {}
  local function split(s, out)
    if s == "" then return out end
    for part in s:gmatch("[^:]+") do
      if part:find("%.") then
        local a, b, c, d = part:match("^(%d+)%.(%d+)%.(%d+)%.(%d+)$")
        if not a then return nil end
        out[#out + 1] = tonumber(a) * 256 + tonumber(b)
        out[#out + 1] = tonumber(c) * 256 + tonumber(d)
      else
        local v = tonumber(part, 16)
        if not v or #part > 4 then return nil end
        out[#out + 1] = v
      end
    end
    return out
  end
  if head then
    local h, t = split(head, {}), split(tail, {})
    if not h or not t or #h + #t > 7 then return nil, "bad GID '" .. text .. "'" end
    for _, v in ipairs(h) do groups[#groups + 1] = v end
    for _ = 1, 8 - #h - #t do groups[#groups + 1] = 0 end
    for _, v in ipairs(t) do groups[#groups + 1] = v end
  else
    if not split(text, groups) or #groups ~= 8 then return nil, "bad GID '" .. text .. "'" end
  end
  local bytes = {}
  for i, v in ipairs(groups) do
    bytes[2 * i - 1] = string.char(math.floor(v / 256))
    bytes[2 * i] = string.char(v % 256)
  end
  return table.concat(bytes)
end

--- The text form of a raw GID, as inet_ntop writes it.
function ex.gid_text(raw)
  local w = {}
  for i = 1, 8 do w[i] = raw:byte(2 * i - 1) * 256 + raw:byte(2 * i) end
  local best, bestlen, cur, curlen = nil, 0, nil, 0
  for i = 1, 8 do
    if w[i] == 0 then
      if not cur then cur, curlen = i, 0 end
      curlen = curlen + 1
      if curlen > bestlen then best, bestlen = cur, curlen end
    else
      cur = nil
    end
  end
  if bestlen < 2 then best = nil end
  local out, i = {}, 1
  while i <= 8 do
    if i == best then
      out[#out + 1] = (i == 1) and "::" or ":"
      i = i + bestlen
    else
      if i == 7 and best == 1 and (bestlen == 6 or (bestlen == 5 and w[6] == 0xffff)) then
        out[#out + 1] = string.format("%d.%d.%d.%d", raw:byte(13, 16))
        break
      end
      out[#out + 1] = string.format("%x", w[i]) .. (i < 8 and ":" or "")
      i = i + 1
    end
  end
  return table.concat(out)
end

-- ---------------------------------------------------------------- TCP

local Conn = {}
Conn.__index = Conn

--- Exactly n bytes, or nil, msg (the peer closed, or sent nothing for ex.IO_TIMEOUT s).
function Conn:read(n)
  local acc, deadline = "", clock() + ex.IO_TIMEOUT
  while true do
    local s, err, partial = self.sock:receive(n, acc)
    if s then return s end
    acc = partial or acc
    if err ~= "timeout" or clock() > deadline then
      if err == "timeout" then err = "no data for " .. ex.IO_TIMEOUT .. " s" end
      return nil, "reading " .. n .. " bytes from the peer: " .. tostring(err) ..
        (#acc > 0 and (" after " .. #acc) or "")
    end
  end
end

function Conn:write(s)
  local i, deadline = 1, clock() + ex.IO_TIMEOUT
  while i <= #s do
    local last, err, partial = self.sock:send(s, i)
    if last then return true end
    i = (partial or i - 1) + 1
    if err ~= "timeout" or clock() > deadline then
      return nil, "writing to the peer: " .. tostring(err)
    end
  end
  return true
end

function Conn:close() self.sock:close() end

local function wrap(sock, role)
  sock:settimeout(SLICE)
  sock:setoption("tcp-nodelay", true)
  return setmetatable({ sock = sock, role = role }, Conn)
end

--- Connects to a server; nil, msg when none listens (or none answers in ex.CONNECT_TIMEOUT s).
function ex.connect(host, port)
  local function failed(err) return nil, string.format("couldn't connect to %s:%d: %s", host, port, tostring(err)) end
  local ip, err = host
  -- a numeric address needs no resolver (a node without one resolves none)
  if not host:match("^%d+%.%d+%.%d+%.%d+$") and not host:find(":", 1, true) then
    ip, err = socket.dns.toip(host)
    if not ip then return failed(err) end
  end
  local sock = socket.tcp()
  sock:settimeout(SLICE)
  local ok
  ok, err = sock:connect(ip, port)
  local deadline = clock() + ex.CONNECT_TIMEOUT
  while not ok and err == "timeout" and clock() < deadline do
    local _, w = socket.select(nil, { sock }, SLICE)
    if w and w[1] then
      ok, err = sock:connect(ip, port) -- completes the connect, or says why it failed
      if err == "already connected" then ok, err = 1, nil end
    end
  end
  if not ok then
    sock:close()
    return failed(err)
  end
  return wrap(sock, "client")
end

local Listener = {}
Listener.__index = Listener

--- The next client (timeout: seconds to wait for it, nil: forever).
function Listener:accept(timeout)
  self.sock:settimeout(SLICE)
  local deadline = timeout and clock() + timeout
  while true do
    local sock, err = self.sock:accept()
    if sock then return wrap(sock, "server") end
    if err ~= "timeout" or (deadline and clock() > deadline) then return nil, "accept: " .. tostring(err) end
  end
end

function Listener:close() self.sock:close() end

--- Listens on port (all addresses) for up to backlog clients at a time.
function ex.listener(port, backlog)
  local server, err = socket.bind("*", port, backlog or 1) -- SO_REUSEADDR set
  if not server then return nil, string.format("couldn't listen to port %d: %s", port, tostring(err)) end
  return setmetatable({ sock = server }, Listener)
end

--- Listens on port (all addresses) and accepts one client.
-- timeout: seconds to wait for it (nil: forever).
function ex.listen(port, timeout)
  local l, err = ex.listener(port)
  if not l then return nil, err end
  local conn
  conn, err = l:accept(timeout)
  l:close()
  return conn, err
end

-- ---------------------------------------------------------------- pingpong

local DEST_SIZE = 52 -- "0000:000000:000000:" + 32 hex digits + NUL

--- The pingpong message for {lid=, qpn=, psn=, gid=}.
function ex.pack_dest(d)
  local raw = assert(ex.gid_raw(d.gid))
  local hex = raw:gsub(".", function(c) return string.format("%02x", c:byte()) end)
  return string.format("%04x:%06x:%06x:%s", d.lid or 0, d.qpn or 0, d.psn or 0, hex) .. "\0"
end

--- {lid=, qpn=, psn=, gid=text, gid_raw=} from a pingpong message (52 bytes, the last a NUL).
function ex.unpack_dest(s)
  local lid, qpn, psn, hex = s:match("^(%x%x%x%x):(%x%x%x%x%x%x):(%x%x%x%x%x%x):(" .. string.rep("%x", 32) .. ")%z$")
  if not lid then return nil, "malformed address message from the peer" end
  local raw = hex:gsub("%x%x", function(h) return string.char(tonumber(h, 16)) end)
  return { lid = tonumber(lid, 16), qpn = tonumber(qpn, 16), psn = tonumber(psn, 16),
           gid = ex.gid_text(raw), gid_raw = raw }
end

local function write_dests(conn, dests, slots)
  local t = {}
  for i = 1, slots do t[i] = ex.pack_dest(dests[i] or {}) end
  return conn:write(table.concat(t))
end

local function read_dests(conn, slots)
  local out = {}
  for i = 1, slots do
    local s, err = conn:read(DEST_SIZE)
    if not s then return nil, err end
    local d
    d, err = ex.unpack_dest(s)
    if not d then return nil, err end
    out[i] = d
  end
  return out
end

--- Client side: send our addresses (slots messages, the rest zero), read the
-- server's, then "done".  Returns the server's addresses.
function ex.client_exchange(conn, dests, slots)
  slots = slots or #dests
  local ok, err = write_dests(conn, dests, slots)
  if not ok then return nil, err end
  local remote
  remote, err = read_dests(conn, slots)
  if not remote then return nil, err end
  ok, err = conn:write("done\0")
  if not ok then return nil, err end
  return remote
end

--- Server side: read the client's addresses, call ready(remote) (connect the
-- QPs there; it returns our addresses or nil, msg), answer, wait for "done".
function ex.server_exchange(conn, slots, ready)
  local remote, err = read_dests(conn, slots)
  if not remote then return nil, err end
  local mine
  mine, err = ready(remote)
  if not mine then return nil, err end
  local ok
  ok, err = write_dests(conn, mine, slots)
  if not ok then return nil, err end
  ok, err = conn:read(5)
  if not ok then return nil, err end
  if ok ~= "done\0" then return nil, "malformed end message from the peer" end
  return remote
end

-- ---------------------------------------------------------------- xsrq_pingpong

ex.XSRQ_DEST_SIZE = 66 -- "0000:000000:000000:000000:000000:" + 32 hex digits + NUL
ex.END = "END\0" -- the termination message

local function gid_hex(gid)
  local raw = assert(ex.gid_raw(gid))
  return (raw:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

local function hex_gid(hex)
  return (hex:gsub("%x%x", function(h) return string.char(tonumber(h, 16)) end))
end

--- The ibv_xsrq_pingpong message for {lid=, recv_qpn=, send_qpn=, psn=, srqn=, gid=}.
function ex.pack_xsrq_dest(d)
  return string.format("%04x:%06x:%06x:%06x:%06x:%s", d.lid or 0, d.recv_qpn or 0, d.send_qpn or 0,
    d.psn or 0, d.srqn or 0, gid_hex(d.gid)) .. "\0"
end

--- {lid=, recv_qpn=, send_qpn=, psn=, srqn=, gid=text, gid_raw=} from such a message.
function ex.unpack_xsrq_dest(s)
  local f = { s:match("^(%x+):(%x+):(%x+):(%x+):(%x+):(" .. string.rep("%x", 32) .. ")") }
  if #f ~= 6 then return nil, "malformed XRC address message from the peer" end
  local raw = hex_gid(f[6])
  return { lid = tonumber(f[1], 16), recv_qpn = tonumber(f[2], 16), send_qpn = tonumber(f[3], 16),
           psn = tonumber(f[4], 16), srqn = tonumber(f[5], 16), gid = ex.gid_text(raw), gid_raw = raw }
end

function ex.send_xsrq_dest(conn, d)
  local ok, err = conn:write(ex.pack_xsrq_dest(d))
  if not ok then return nil, "Couldn't send local address: " .. err end
  return true
end

function ex.recv_xsrq_dest(conn)
  local s, err = conn:read(ex.XSRQ_DEST_SIZE)
  if not s then return nil, "Couldn't read remote address: " .. err end
  return ex.unpack_xsrq_dest(s)
end

--- The termination handshake: "END" and its NUL.
function ex.send_end(conn)
  local ok, err = conn:write(ex.END)
  if not ok then return nil, "Couldn't send termination ack: " .. err end
  return true
end

function ex.recv_end(conn)
  local s, err = conn:read(#ex.END)
  if not s then return nil, "Couldn't read remote termination ack: " .. err end
  if s ~= ex.END then return nil, "Invalid termination ack was accepted" end
  return true
end

-- ---------------------------------------------------------------- perftest

--- perftest's ctx_xchg_data: the client writes first, the server reads first.
function ex.xchg(conn, data)
  local got, err
  if conn.role == "client" then
    local ok, e = conn:write(data)
    if not ok then return nil, e end
    got, err = conn:read(#data)
  else
    got, err = conn:read(#data)
    if got then
      local ok, e = conn:write(data)
      if not ok then return nil, e end
    end
  end
  return got, err
end

ex.KEY_SIZE = 108

--- perftest's key message: lid:out_reads:qpn:psn:rkey:vaddr:gid bytes:srqn:
function ex.pack_key(d)
  local raw = assert(ex.gid_raw(d.gid))
  local gid = raw:gsub(".", function(c) return string.format("%02x:", c:byte()) end)
  local s = string.format("%04x:%04x:%06x:%06x:%08x:%016x:", d.lid or 0, d.out_reads or 1, d.qpn or 0,
    d.psn or 0, d.rkey or 0, d.vaddr or 0) .. gid .. string.format("%08x:", d.srqn or 0)
  return s .. "\0"
end

function ex.unpack_key(s)
  local f = {}
  for part in s:gmatch("(%x+):") do f[#f + 1] = tonumber(part, 16) end
  if #f ~= 23 then return nil, "malformed perftest key message from the peer" end
  local raw = {}
  for i = 7, 22 do raw[#raw + 1] = string.char(f[i]) end
  raw = table.concat(raw)
  return { lid = f[1], out_reads = f[2], qpn = f[3], psn = f[4], rkey = f[5], vaddr = f[6],
           gid = ex.gid_text(raw), gid_raw = raw, srqn = f[23] }
end

ex.PERFTEST_VERSION = "6.06" -- the perftest exchange level spoken here
local MTU_ENUM = { [256] = 1, [512] = 2, [1024] = 3, [2048] = 4, [4096] = 5 }

local function be32(n)
  return string.char(math.floor(n / 2 ^ 24) % 256, math.floor(n / 2 ^ 16) % 256, math.floor(n / 256) % 256,
    n % 256)
end

--- What every perftest test exchanges first: versions, system data (from
-- 5.32 on) and the MTU (from 5.1 on); returns the MTU both sides can use
-- (the smaller of mtu and the peer's) and the peer's version string.
function ex.perftest_start(conn, mtu)
  local rem_version, err = ex.xchg(conn, ex.PERFTEST_VERSION .. string.rep("\0", 16 - #ex.PERFTEST_VERSION))
  if not rem_version then return nil, err end
  local rv = tonumber(rem_version:match("^[%d.]+") or "0") or 0
  if rv >= 5.32 then
    for _, v in ipairs({ 4096, 64 }) do -- page size, cache line
      local ok, e = ex.xchg(conn, be32(v))
      if not ok then return nil, e end
    end
  end
  if rv >= 5.1 then
    local mine = tostring(MTU_ENUM[mtu] or 3) .. "\0"
    local rem, e = ex.xchg(conn, rv >= 5.31 and mine or (mine .. "\0\0"))
    if not rem then return nil, e end
    local r = tonumber(rem:match("^%d+") or "")
    for bytes, en in pairs(MTU_ENUM) do if en == r and bytes < mtu then mtu = bytes end end
  end
  return mtu, rem_version:match("^[%d.]*")
end

local function be64(n) -- a non-negative integer below 2^53
  return be32(math.floor(n / 2 ^ 32)) .. be32(n % 2 ^ 32)
end

local function from_be(s) -- a big-endian unsigned integer (up to 2^53)
  local n = 0
  for i = 1, #s do n = n * 256 + s:byte(i) end
  return n
end

local function be_double(x) -- IEEE 754 binary64, big-endian (string.pack where the interpreter has it)
  if string.pack then return string.pack(">d", x) end
  if x ~= x or x <= 0 or x == math.huge then return string.rep("\0", 8) end -- figures: positive or nothing
  local e = math.floor(math.log(x) / math.log(2))
  local m = x / 2 ^ e
  if m >= 2 then m, e = m / 2, e + 1 elseif m < 1 then m, e = m * 2, e - 1 end
  if e < -1022 then return string.rep("\0", 8) end
  local frac = (m - 1) * 2 ^ 52
  return be32((e + 1023) * 2 ^ 20 + math.floor(frac / 2 ^ 32)) .. be32(frac % 2 ^ 32)
end

local function from_be_double(s)
  if string.unpack then return (string.unpack(">d", s)) end
  local b1, b2 = s:byte(1, 2)
  local e = b1 % 128 * 16 + math.floor(b2 / 16)
  local m = from_be(string.char(b2 % 16) .. s:sub(3))
  local v = e == 0 and m * 2 ^ -1074 or (1 + m / 2 ^ 52) * 2 ^ (e - 1023)
  return b1 >= 128 and -v or v
end

--- perftest's exchange of bandwidth reports (xchg_bw_reports) after a
-- half-duplex test: rep {size =, iters =, bw_peak =, bw_avg =, msg_rate =}
-- (MB/s, Mpps) goes to the peer, whose report comes back; version: the
-- peer's (iterations are 8 bytes from 5.33 on, 4 before).
function ex.perftest_bw_reports(conn, rep, version)
  local wide = (tonumber(version) or 0) >= 5.33
  local out = {}
  local fields = { { "size", 8 }, { "iters", wide and 8 or 4 }, { "bw_peak" }, { "bw_avg" }, { "msg_rate" } }
  for _, f in ipairs(fields) do
    local name, int = f[1], f[2]
    local v = rep[name] or 0
    local mine = int == 8 and be64(v) or int == 4 and be32(v) or be_double(v)
    local got, err = ex.xchg(conn, mine)
    if not got then return nil, err end
    out[name] = int and from_be(got) or from_be_double(got)
  end
  return out
end

--- One perftest handshake: exchange key messages, returns the peer's.
function ex.hand_shake(conn, d)
  local s, err = ex.xchg(conn, ex.pack_key(d))
  if not s then return nil, err end
  return ex.unpack_key(s)
end

return ex
