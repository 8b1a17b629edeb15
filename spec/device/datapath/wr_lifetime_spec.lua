-- Prepared WR lists on rxe0: what an entry points to stays alive and valid
-- whatever the script does to its tables afterwards, a WR that fails to parse
-- leaves its entry as it was, and ibv.transfer refuses a UD send list without AHs.
local ibv = require "ibverbs"
local support = require "support"

local function churn()
  collectgarbage(); collectgarbage()
  local junk = {}
  for i = 1, 20000 do junk[i] = string.rep(string.char(65 + i % 26), 48) .. i end
  return junk
end

describe("prepared WR lists", function()
  it("keep the AH of an entry alive after the script drops it from its table", function()
    local env = support.pair{ qp_type = "ud" }
    local mr = assert(env.pd:reg_mr(4096, { "local_write" }))
    assert(env.b:post_recv{ wr_id = 7, sge = { mr = mr, length = 4096 } })
    local function wr() -- the AH lives in the table only (no stale register holds it)
      return { opcode = "send", inline = "via a dropped ah", send_flags = { "signaled" },
               ah = assert(env.pd:create_ah{ port_num = 1, grh = { dgid = env.gid, sgid_index = support.GID_INDEX } }),
               remote_qpn = env.b.qp_num, remote_qkey = 0x11111111 }
    end
    local t = wr()
    local sl = ibv.send_wrs(1)
    sl:set(1, t)
    local weak = setmetatable({ t.ah }, { __mode = "v" })
    t.ah = nil
    local junk = churn()
    assert.is_userdata(weak[1]) -- the list still holds it
    assert(env.a:post_send(sl))
    local wcs = support.completions(env.cq, 2)
    assert.equal(2, #wcs, #junk)
    for _, wc in ipairs(wcs) do assert.equal("success", wc.status) end
    assert.equal("via a dropped ah", mr:read(40, 16))
  end)

  it("keep the inline string of an entry after the script drops it from its table", function()
    local env = support.pair()
    local mr = assert(env.pd:reg_mr(4096, { "local_write" }))
    local function wr() -- the string lives in the table only (LuaJIT interns: keep it upper case)
      local data = ("inline payload %d "):format(os.time()):rep(3):sub(1, 60)
      return { inline = data, send_flags = { "signaled" } }, data:upper()
    end
    local t, expected = wr()
    local sl = ibv.send_wrs(1)
    sl:set(1, t)
    t.inline = nil
    local junk = churn()
    assert(env.b:post_recv{ wr_id = 1, sge = { mr = mr, length = 64 } })
    assert(env.a:post_send(sl))
    local wcs = support.completions(env.cq, 2)
    assert.equal(2, #wcs, #junk)
    assert.equal(expected, mr:read(0, 60):upper())
  end)

  it("leave an entry as it was when its new WR does not parse", function()
    local env = support.pair()
    local rl = ibv.recv_wrs(3)
    local mr = assert(env.pd:reg_mr(4096, { "local_write" }))
    rl:fill{ sge = { mr = mr, length = 64 }, stride = 64 }
    assert(env.b:post_recv(rl))
    local sl = ibv.send_wrs(3)
    sl:fill{ inline = "abc", send_flags = { "signaled" } }
    assert.error_matches(function()
      sl:set(2, { inline = "zz", send_flags = { "signaled" }, imm_data = -1 })
    end, "imm_data")
    assert(env.a:post_send(sl))
    local wcs = support.completions(env.cq, 6)
    assert.equal(6, #wcs)
    assert.equal("abc", mr:read(64, 3))
  end)
end)

describe("ibv.transfer", function()
  it("raises for a send list without AHs on a UD QP instead of posting it", function()
    local env = support.pair{ qp_type = "ud" }
    local sl = ibv.send_wrs(2)
    sl:fill{ inline = "x", send_flags = { "signaled" } }
    assert.error_matches(function()
      ibv.transfer{ send_qp = env.a, send_cq = env.cq, send_wrs = sl, count = 2, timeout = 1 }
    end, "field 'ah' is required on a UD QP")
  end)
end)
