-- README.md's quick start, as the README has it at test time, runs on rxe0:
-- the code block under "## Quick start" is extracted and run as a script
-- with this interpreter and its build, so the README cannot drift from
-- working code.
local support = require "support"

--- The first ```lua block after the "## Quick start" heading, as its lines.
local function quick_start()
  local text = assert(support.slurp("README.md"), "README.md not found (run from the checkout)")
  local section = assert(text:match("\n## Quick start\n(.-)\n## "), "README.md has no '## Quick start' section")
  local code = assert(section:match("```lua\n(.-\n)```"), "the quick start has no ```lua code block")
  local lines = {}
  for l in code:gmatch("([^\n]*)\n") do lines[#lines + 1] = l end
  return code, lines
end

describe("on rxe0, README.md's quick start", function()
  it("is at most 20 lines of Lua", function()
    local _, lines = quick_start()
    assert.is_true(#lines > 0 and #lines <= 20, #lines .. " lines")
  end)

  it("runs as written: the RDMA write arrives and the script prints it", function()
    local code = quick_start()
    local path = os.tmpname() .. ".lua"
    local f = assert(io.open(path, "w"))
    f:write(code)
    f:close()
    local env = ("LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH='%s/?.so;;'"):format(support.BUILD)
    local out, rc = support.capture(("timeout 60 env %s %s %s"):format(env, support.LUA, path))
    os.remove(path)
    assert.equal(0, rc, out)
    assert.equal("hello, RDMA\n", out)
  end)
end)
