--- The wire format of ibverbs.fabric: every frame is an 8-hex-digit length then
-- a body; a body is JSON (dkjson) or, for route, made by hand from strings.
-- The hand-made bodies start with a letter that says what they are:
--   R  a rank's route frame:    "R<seq> <len(up)|-1> <up>" then records "<to> <len> <payload>"
--   r  rank 0's route answer:   "r<len> <dead as JSON>" then records "<from> <len> <payload>"
--   B  a relay's bundle:        "B<seq> <len> <dead as JSON><len> <sources>" then records
--                               "<group> <len> <part>" (group -1: the ups)
--   b  rank 0's relay answer:   "b<len> <dead as JSON>", "!<ranks>\n" when relays must resend, then
--                               the items for the relay's group
--   M  a relay to a relay:      "M<seq> " then the items for the other's group (ibverbs.fabric.mesh)
--   L  a relay's resend:        "L<seq> " then what it had sent relays rank 0 buried
-- A part (and a relay answer's tail) is items "<from> <to> <len> <payload>".
-- One record reader (records) serves all of them and one body decoder (decode)
-- reads every frame, wherever it arrives.  The sending and blocking reading of
-- frames on a luasocket socket are here too; waiting on many sockets is
-- ibverbs.fabric.hub's.
local socket = require "socket"
local dkjson = require "dkjson"

local wire = {}

--- A list that dkjson writes as [] even when empty.
wire.NOTHING = setmetatable({}, { __jsontype = "array" })

--- A body framed: its 8-hex-digit length, then the body.
function wire.frame(body) return string.format("%08x", #body) .. body end

-- LuaJIT's tostring keeps 14 digits, so dkjson would round 64-bit addresses:
-- such numbers are written with every digit (dkjson's __tojson).
local function exact(v)
  if type(v) == "number" then
    if v == v and v ~= math.huge and v ~= -math.huge and tonumber(tostring(v)) ~= v then
      local text = v == math.floor(v) and string.format("%.0f", v) or string.format("%.17g", v)
      return setmetatable({}, { __tojson = function() return text end })
    end
    return v
  end
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = exact(x) end
  return setmetatable(out, getmetatable(v))
end

--- A Lua value as a JSON frame, or nil, msg.
function wire.encode(msg)
  local ok, s = pcall(dkjson.encode, exact(msg))
  if not ok or type(s) ~= "string" then return nil, "cannot serialise the value: " .. tostring(s) end
  return wire.frame(s)
end

local RECORD = { "^(%-?%d+) (%d+) ()", "^(%-?%d+) (%-?%d+) (%d+) ()" }

--- The records of s from position p on: "<key> <len> <payload>" (nkeys 1) or
-- "<key> <key2> <len> <payload>" (nkeys 2); fn(payload, key, key2) for each.
-- True when the records end exactly at the end of s, else nil.
function wire.records(s, p, nkeys, fn)
  local pat = RECORD[nkeys]
  while p <= #s do
    local a, b, c, d = s:match(pat, p)
    if not a then return nil end
    local key2, len, q
    if nkeys == 1 then len, q = b, c else key2, len, q = b, c, d end
    len = tonumber(len)
    fn(s:sub(q, q + len - 1), tonumber(a), key2 and tonumber(key2))
    p = q + len
  end
  return p == #s + 1 or nil
end

-- Records appended to the header parts: "<key> <len> <payload>" per {key, payload} of list.
local function with_records(parts, list)
  for _, m in ipairs(list) do
    parts[#parts + 1] = m[1] .. " " .. #m[2] .. " "
    parts[#parts + 1] = m[2]
  end
  return wire.frame(table.concat(parts))
end

-- "<len> <dead as JSON>" at p: the dead list (nil when empty) and where the rest starts.
local function dead_at(body, p)
  local dlen, q = body:match("^(%d+) ()", p)
  if not dlen then return nil end
  dlen = tonumber(dlen)
  local dead = dlen > 0 and dkjson.decode(body:sub(q, q + dlen - 1)) or nil
  return q + dlen, dead
end

local function dead_json(dead) return dead and dkjson.encode(dead) or "" end

--- A rank's route frame (v = {m = {{to, string}, ...}, u = string or nil}).
function wire.route_encode(seq, v)
  return with_records({ "R", seq, " ", v.u and #v.u or -1, " ", v.u or "" }, v.m)
end

local function route_decode(body)
  local seq, ulen, p = body:match("^R(%d+) (%-?%d+) ()")
  if not seq then return nil, "malformed route frame" end
  ulen = tonumber(ulen)
  local v = { m = {} }
  if ulen >= 0 then v.u = body:sub(p, p + ulen - 1); p = p + ulen end
  if not wire.records(body, p, 1, function(payload, to) v.m[#v.m + 1] = { to, payload } end) then
    return nil, "malformed route frame"
  end
  return { op = "route", seq = tonumber(seq), v = v, raw = true }
end

--- Rank 0's (or a relay's) answer to route: list is {from, value} pairs; made
-- by hand when every value is a string, else JSON (a rank that sent JSON).
function wire.route_reply(list, dead)
  for _, m in ipairs(list) do
    if type(m[2]) ~= "string" then return wire.encode({ v = list, dead = dead }) end
  end
  local d = dead_json(dead)
  return with_records({ "r", #d, " ", d }, list)
end

local function route_reply_decode(body)
  local p, dead = dead_at(body, 2)
  if body:byte(1) ~= 114 or not p then return nil, "malformed route reply" end
  local msg = { v = {}, dead = dead }
  if not wire.records(body, p, 1, function(payload, from) msg.v[#msg.v + 1] = { from, payload } end) then
    return nil, "malformed route reply"
  end
  return msg
end

--- A relay's bundle: the ranks it buried since its last ({rank, why} pairs),
-- the ranks whose frames it carries, and parts[group] = list of items.
function wire.bundle_encode(seq, dead, srcs, parts)
  local d = #dead > 0 and dkjson.encode(dead) or ""
  local s = table.concat(srcs, ",")
  local list = {}
  for g, l in pairs(parts) do list[#list + 1] = { g, table.concat(l) } end
  return with_records({ "B", seq, " ", #d, " ", d, #s, " ", s }, list)
end

local function bundle_decode(body)
  local seq, q = body:match("^B(%d+) ()")
  local p, dead
  if seq then p, dead = dead_at(body, q) end
  local slen, r = body:match("^(%d+) ()", p or 1)
  if not (p and slen) then return nil, "malformed bundle" end
  local v = { parts = {}, srcs_text = body:sub(r, r + tonumber(slen) - 1), dead = dead }
  p = r + tonumber(slen)
  if not wire.records(body, p, 1, function(part, g) v.parts[g] = part end) then
    return nil, "malformed bundle"
  end
  return { op = "route", seq = tonumber(seq), v = v }
end

--- The ranks whose frames a decoded bundle (its v) carries, read when asked
-- (rank 0 asks only when it serves adopted ranks: a list of every rank a
-- route, O(N), otherwise unread).
function wire.bundle_srcs(v)
  if not v.srcs then
    v.srcs = {}
    for rank in (v.srcs_text or ""):gmatch("%d+") do v.srcs[#v.srcs + 1] = tonumber(rank) end
  end
  return v.srcs
end

--- Rank 0's answer to a relay: the dead ranks, the relays it asks to
-- resend to (a list of ranks, or nil: "!r,r\n" after the dead) and the
-- items for its group.
function wire.bundle_reply(dead, parts, resend)
  local d = dead_json(dead)
  local r = resend and #resend > 0 and ("!" .. table.concat(resend, ",") .. "\n") or ""
  return wire.frame("b" .. #d .. " " .. d .. r .. table.concat(parts or {}))
end

local function bundle_reply_decode(body)
  local p, dead = dead_at(body, 2)
  if body:byte(1) ~= 98 or not p then return nil, "malformed bundle reply" end
  local resend
  if body:byte(p) == 33 then
    local list, q = body:match("^!([%d,]*)\n()", p)
    if not list then return nil, "malformed bundle reply" end
    resend = {}
    for r in list:gmatch("%d+") do resend[#resend + 1] = tonumber(r) end
    p = q
  end
  return { blob = body:sub(p), dead = dead, resend = resend }
end

-- A relay's mesh frame ("M<seq> <items>") or resent items ("L<seq> <items>").
local function items_decode(body)
  local seq, p = body:match("^[ML](%d+) ()")
  if not seq then return nil, "malformed relay frame" end
  local blob = body:sub(p)
  return { op = body:byte(1) == 77 and "mesh" or "late", seq = tonumber(seq), blob = blob, v = blob }
end

local DECODE = { [82] = route_decode, [114] = route_reply_decode, [66] = bundle_decode,
  [98] = bundle_reply_decode, [77] = items_decode, [76] = items_decode } -- R r B b M L

local function decode(body)
  local hand = DECODE[body:byte(1)]
  if hand then return hand(body) end
  local msg, _, err = dkjson.decode(body)
  if type(msg) ~= "table" then return nil, "malformed frame: " .. tostring(err) end
  return msg
end

--- Any frame's body as its message table, or nil, msg: whatever the bytes
-- (a JSON nested past the parser's depth, a record that lies about its
-- length), never an error raised.
function wire.decode(body)
  local ok, msg, err = pcall(decode, body)
  if not ok then return nil, "malformed frame: " .. tostring(msg) end
  return msg, err
end

--- The most bytes a frame's body may have (wire.split's and wire.read's
-- default bound: a frame's length is checked before its body is buffered).
wire.MAX_FRAME = 256 * 1024 * 1024

-- The length in the 8-hex-digit header at p of s, or nil, msg.
local function header(s, p, max)
  if not s:find("^%x%x%x%x%x%x%x%x", p) then return nil, "malformed frame (no length)" end
  local n = tonumber(s:sub(p, p + 7), 16)
  if n > max then return nil, string.format("a frame of %d bytes (at most %d)", n, max) end
  return n
end

--- The frames at the start of buf: their bodies, and what is left (a partial
-- frame); at a length that is not one (not 8 hex digits, or over max bytes:
-- wire.MAX_FRAME by default), the bodies before it, "" and the error.
function wire.split(buf, max)
  local bodies, p = {}, 1
  while #buf - p + 1 >= 8 do
    local n, err = header(buf, p, max or wire.MAX_FRAME)
    if not n then return bodies, "", err end
    if #buf - p + 1 < 8 + n then break end
    bodies[#bodies + 1] = buf:sub(p + 8, p + 7 + n)
    p = p + 8 + n
  end
  return bodies, buf:sub(p)
end

-- ---------------------------------------------------------------- payloads of the relay tree

--- A route value tagged for the tree: "s" and a string, or "j" and JSON.
function wire.tag(v)
  if type(v) == "string" then return "s" .. v end
  local s, err = wire.encode(v)
  if not s then error(err, 0) end
  return "j" .. s:sub(9)
end

function wire.untag(s)
  if s:byte(1) == 115 then return s:sub(2) end
  return (dkjson.decode(s, 2))
end

--- A list of {from, tagged} with each value untagged (in place); nil when
-- it is no such list (a frame that lies).
function wire.untag_list(list)
  if type(list) ~= "table" then return nil end
  for _, m in ipairs(list) do
    if type(m) ~= "table" or type(m[1]) ~= "number" or type(m[2]) ~= "string" then return nil end
    m[2] = wire.untag(m[2])
  end
  return list
end

--- One item of a part: "<from> <to> <len> <payload>".
function wire.item(from, to, payload) return from .. " " .. to .. " " .. #payload .. " " .. payload end

--- The items of a blob, fn(from, to, payload) for each; true, or nil, msg.
function wire.items(blob, fn)
  if wire.records(blob, 1, 2, function(payload, from, to) fn(from, to, payload) end) then return true end
  return nil, "malformed tree frame"
end

--- The items of a blob as each destination's list of {from, payload}, or nil, msg.
function wire.inbox_of(blob)
  local inbox = {}
  local ok, err = wire.items(blob, function(from, to, payload)
    local l = inbox[to]
    if not l then l = {}; inbox[to] = l end
    l[#l + 1] = { from, payload }
  end)
  if not ok then return nil, err end
  return inbox
end

-- ---------------------------------------------------------------- one socket, blocking

--- Sends a frame already encoded, before deadline (at least a second).
function wire.send_raw(sock, s, deadline)
  sock:settimeout(math.max((deadline or socket.gettime() + 10) - socket.gettime(), 1))
  local ok, err = sock:send(s)
  if not ok then return nil, err end
  return true
end

function wire.send(sock, msg, deadline)
  local s, err = wire.encode(msg)
  if not s then return nil, err end
  return wire.send_raw(sock, s, deadline)
end

--- One frame from sock before deadline (socket.gettime's clock), decoded;
-- a frame over max bytes (wire.MAX_FRAME) is refused before it is read.
function wire.read(sock, deadline, max)
  local left = deadline - socket.gettime()
  if left <= 0 then return nil, "timeout" end
  sock:settimeout(left)
  local head, err = sock:receive(8)
  if not head then return nil, err end
  local n
  n, err = header(head, 1, max or wire.MAX_FRAME)
  if not n then return nil, err end
  sock:settimeout(math.max(deadline - socket.gettime(), 0.5))
  local body
  body, err = sock:receive(n)
  if not body then return nil, err end
  return wire.decode(body)
end

--- A socket error as an error message says it.
function wire.said(err) return err == "closed" and "connection closed" or tostring(err) end

return wire
