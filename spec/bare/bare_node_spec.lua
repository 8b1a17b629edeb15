-- The portable hosts on a bare node, inside tools/rxe-vm (tools/bullseye
-- specs runs this from the VM's own root): the bare tree
-- (.cache/bullseye-bare: Debian 11 minbase with libibverbs1, librdmacm1 and
-- ibverbs-providers, rdma-core 33, no Lua of any kind) with copies of
-- build/portable/ibvlua and ibvluajit in its /tmp and nothing else (not the
-- project): devinfo, rc_pingpong against rdma-core's ibv_rc_pingpong (the C
-- peer is the VM's own, outside the tree: ibvlua the server, ibvluajit the
-- client, each role once), fabric_check alone.
local support = require "support"

local ITERS = 40

local function bare(cmd) return "tools/bullseye bare " .. cmd end

-- Both sides finished, reported the iterations, and each one's remote
-- address is the other's local one (LID QPN PSN GID).
local function check_pingpong(r)
  assert.equal(0, r.server_rc, "server failed:\n" .. r.server)
  assert.equal(0, r.client_rc, "client failed:\n" .. r.client)
  local addr = {}
  for _, side in ipairs({ "server", "client" }) do
    local out = r[side]
    assert.matches(ITERS .. " iters in [%d.]+ seconds = [%d.]+ usec/iter", out)
    addr[side] = {}
    for which, a in out:gmatch("(%a+) address:%s+(LID 0x%x+, QPN 0x%x+, PSN 0x%x+[:,] GID %S+)") do
      addr[side][which] = a:gsub(": GID", ", GID")
    end
  end
  assert.is_string(addr.server["local"], r.server)
  assert.equal(addr.server["local"], addr.client.remote)
  assert.equal(addr.client["local"], addr.server.remote)
end

describe("a bare node (Debian 11 minbase, rdma-core 33, no Lua): the portable hosts alone", function()
  it("holds no Lua: no package, no file named lua*, liblua* or *.lua; /tmp has the two hosts", function()
    local out = support.capture("cd .cache/bullseye-bare && { grep '^Package: .*lua' var/lib/dpkg/status; " ..
      "find . -xdev \\( -name 'lua*' -o -name 'liblua*' -o -name '*.lua' \\) -print; }")
    assert.equal("", out)
    local rc
    out, rc = support.capture(bare("sh -c 'ls /tmp; command -v lua5.4 lua5.3 lua luajit; true'"))
    assert.equal(0, rc, out)
    assert.equal("ibvlua\nibvluajit\n", out)
  end)

  local port = 18800
  for _, h in ipairs({ "ibvlua", "ibvluajit" }) do
    local host = "/tmp/" .. h
    it(h .. ": devinfo -d rxe0, on the node's own rdma-core 33", function()
      local out, rc = support.capture(bare(host .. " devinfo -d rxe0"))
      assert.equal(0, rc, out)
      assert.matches("hca_id:%s+rxe0\n", out)
      assert.matches("state:%s+PORT_ACTIVE %(4%)", out)
      -- the node's libibverbs, not the VM's 44: the verbs of rdma-core 34 and later are missing
      out, rc = support.capture(bare(host ..
        " -e 'print(table.concat(require(\"ibverbs\").rdma_core.missing, \" \"))'"))
      assert.equal(0, rc, out)
      assert.matches("ibv_reg_dmabuf_mr", out)
    end)

    if h == "ibvlua" then
      it(h .. " rc_pingpong as server, ibv_rc_pingpong as client", function()
        port = port + 1
        local args = ("-g 1 -n %d -p %d"):format(ITERS, port)
        check_pingpong(support.pair_run(bare(host .. " rc_pingpong " .. args),
          "ibv_rc_pingpong " .. args .. " 127.0.0.1", port))
      end)
    else
      it("ibv_rc_pingpong as server, " .. h .. " rc_pingpong as client", function()
        port = port + 1
        local args = ("-g 1 -n %d -p %d"):format(ITERS, port)
        check_pingpong(support.pair_run("ibv_rc_pingpong " .. args,
          bare(host .. " rc_pingpong " .. args .. " 127.0.0.1"), port))
      end)
    end

    it(h .. ": fabric_check alone passes every check on rxe0", function()
      local out, rc = support.capture(bare(host .. " fabric_check -d rxe0"))
      assert.equal(0, rc, out)
      assert.matches("rc_send_recv%s+PASS", out)
      assert.matches("ud_send%s+PASS", out)
      assert.matches("\n%d+ checks, 0 failed: PASS\n", out)
    end)
  end
end)
