-- examples/xsrq_pingpong.lua against ibv_xsrq_pingpong on rxe0.  rxe has no
-- XRC: both programs, as server and as client, must stop at the XRC domain
-- with EOPNOTSUPP, a message and exit status 1, before any connection is made
-- (no crash, no Lua traceback, nothing left hanging: each runs under timeout).
local support = require "support"
local ibv = require "ibverbs"

local roles = {
  { name = "server", args = "-d rxe0 -g 1 -p 18650" },
  { name = "client", args = "-d rxe0 -g 1 -p 18651 127.0.0.1" },
}

describe("on rxe0, xsrq_pingpong stops cleanly at the XRC domain", function()
  it("because rxe0 refuses the legacy open_xrc_domain with EOPNOTSUPP", function()
    local ctx = support.open()
    local d, msg, errno = ctx:open_xrc_domain(-1, ibv.O_CREAT)
    assert.is_nil(d)
    assert.equal(95, errno)
    assert.equal("ibv_open_xrc_domain: Operation not supported", msg)
    ctx:close()
  end)

  for _, r in ipairs(roles) do
    it("ibv_xsrq_pingpong as " .. r.name .. ": \"Couldn't Open the XRC Domain 95\", exit 1", function()
      local out, rc = support.run("timeout 20 ibv_xsrq_pingpong " .. r.args)
      assert.equal(1, rc, out)
      assert.equal("Couldn't Open the XRC Domain 95\n", out)
    end)

    it("xsrq_pingpong.lua as " .. r.name .. ": \"Couldn't Open the XRC Domain: Operation not supported\", exit 1",
      function()
        local out, rc = support.run("timeout 20 " .. support.example("xsrq_pingpong.lua", r.args))
        assert.equal(1, rc, out)
        assert.equal("Couldn't Open the XRC Domain: Operation not supported\n", out)
      end)
  end

  it("xsrq_pingpong.lua with -e (a completion channel) and 4 clients stops at the same place", function()
    local out, rc = support.run("timeout 20 " .. support.example("xsrq_pingpong.lua", "-d rxe0 -e -c 4 -s 64 -p 18652"))
    assert.equal(1, rc, out)
    assert.equal("Couldn't Open the XRC Domain: Operation not supported\n", out)
  end)

  it("xsrq_pingpong.lua on a device that does not exist stops before the domain", function()
    local out, rc = support.run("timeout 20 " .. support.example("xsrq_pingpong.lua", "-d nosuch0"))
    assert.equal(1, rc, out)
    assert.matches("Failed to open device\n$", out)
    assert.not_matches("XRC", out)
  end)
end)
