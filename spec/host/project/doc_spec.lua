-- The API reference (docs/api/*.lua, rendered by LDoc with `make doc`) covers
-- the API as the module registers it: every method of every ibverbs.* type in
-- the registry and every function of ibverbs, ibverbs.cm, ibverbs.exchange,
-- ibverbs.port_counters, ibverbs.fabric and its groups, ibverbs.perftest,
-- ibverbs.node_report (and ibverbs.ffi under LuaJIT) has a doc entry with a summary, and no entry
-- documents a method that does not exist.  In the spirit of luv's bindcov.
local support = require "support"
local LUA = support.LUA

local lines_of = support.lines_of

-- What the module registers, listed by a fresh interpreter (nothing extended by other specs).
local LISTER = [[
local ibv = require "ibverbs"
local cm, exchange = require "ibverbs.cm", require "ibverbs.exchange"
local out = {}
for k, v in pairs(debug.getregistry()) do
  if type(k) == "string" and k:match("^ibverbs%.") and type(v) == "table" and v.__index ~= nil then
    for name, f in pairs(ibv.methods(k)) do
      if type(f) == "function" then out[#out + 1] = k .. ":" .. name end
    end
  end
end
local function functions(modname, t)
  for name, f in pairs(t) do
    if type(f) == "function" then out[#out + 1] = modname .. "." .. name end
  end
end
functions("ibverbs", ibv)
out[#out + 1] = "ibverbs.errno"
functions("ibverbs.cm", cm)
functions("ibverbs.exchange", exchange)
functions("ibverbs.port_counters", require "ibverbs.port_counters")
local fabric = require "ibverbs.fabric"
functions("ibverbs.fabric", fabric)
for name, f in pairs(getmetatable(assert(fabric.init{ rank = 0, size = 1, host = "h" })).__index) do
  if type(f) == "function" and not name:match("^__") then out[#out + 1] = "ibverbs.fabric_group:" .. name end
end
functions("ibverbs.perftest", require "ibverbs.perftest")
functions("ibverbs.node_report", require "ibverbs.node_report")
if jit then functions("ibverbs.ffi", require "ibverbs.ffi") end
table.sort(out)
print(table.concat(out, "\n"))
]]

local function registered()
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(LISTER)
  f:close()
  local list = lines_of(LUA .. " " .. path)
  os.remove(path)
  return list
end

-- What LDoc read from docs/api: "ibverbs.qp:modify", "ibverbs.cm.expect", ... -> summary
local function documented()
  local docs = {}
  local cmd = "cd docs && LUA_PATH='../spec/?.lua;;' ldoc -c config.ld --filter ldoc_items.print . 2>&1"
  for _, l in ipairs(lines_of(cmd)) do
    local mod, item, kind, summary = l:match("^([^\t]+)\t([^\t]+)\t([^\t]*)\t(.*)$")
    assert(mod, "unexpected ldoc output: " .. l)
    -- methods are "ibverbs.qp:modify"; module functions "ibv.open" (the local table's name) or "open"
    local key = item:find(":") and item or (mod .. "." .. item:match("[^.]+$"))
    docs[key] = { summary = summary, kind = kind, module = mod }
  end
  return docs
end

describe("the API reference (docs/api, LDoc)", function()
  local api, docs = registered(), documented()

  it("finds the API to check", function()
    assert.is_true(#api > 150, #api .. " entries")
    for _, want in ipairs({ "ibverbs.qp:modify", "ibverbs.cm_id:connect", "ibverbs.open", "ibverbs.cm.create_ep" }) do
      local found = false
      for _, a in ipairs(api) do found = found or a == want end
      assert.is_true(found, want)
    end
  end)

  it("documents every registered method and module function, each with a summary", function()
    local missing = {}
    for _, name in ipairs(api) do
      local d = docs[name]
      if not d or d.summary == "" then missing[#missing + 1] = name end
    end
    assert.same({}, missing)
  end)

  it("documents no method the module does not have", function()
    local have, stale = {}, {}
    for _, name in ipairs(api) do have[name] = true end
    for name, d in pairs(docs) do
      local checked = d.kind == "method" or d.kind == "function"
      if d.module == "ibverbs.xrc_domain" then checked = false end -- a Lua metatable, not in the registry
      if d.module == "ibverbs.ffi" and not rawget(_G, "jit") then checked = false end
      if checked and not have[name] then stale[#stale + 1] = name end
    end
    table.sort(stale)
    assert.same({}, stale)
  end)

  it("gives every method that can fail its errno values", function()
    local text = {}
    for _, f in ipairs(lines_of("ls docs/api/*.lua")) do
      local h = assert(io.open(f))
      text[#text + 1] = h:read("*a")
      h:close()
    end
    text = table.concat(text, "\n")
    local without = {}
    -- each doc block that promises "nil, message, errno" names the errnos
    for block in text:gmatch("%-%-%-.-\nfunction [^\n]+") do
      if block:find("nil, message, errno") and not block:find("@errno") then
        without[#without + 1] = block:match("function ([^\n(]+)")
      end
    end
    assert.same({}, without)
  end)
end)
