-- Run on every node of `tools/rxe-vm --nodes 2` (tools/run-tests): both nodes
-- run these steps in the same order, one rank each (ibverbs.fabric reads
-- RXE_VM_NODE), so every step is one multi-node run.  Rank 0 (node 1) checks
-- the report; every node checks its own exit status.
local ibv = require "ibverbs"
local support = require "support"
local dkjson = require "dkjson"

local NODE = tonumber(os.getenv("RXE_VM_NODE") or "0")

local function run(script, args)
  return support.run("timeout 150 " .. support.example(script, args))
end

local sh, wait_port = support.sh, support.wait_port

describe("two soft-RoCE nodes", function()
  it("runs under tools/rxe-vm --nodes 2 with rxe0 on eth0", function()
    assert.is_true(NODE == 1 or NODE == 2, "RXE_VM_NODE is " .. tostring(os.getenv("RXE_VM_NODE")))
    assert.equal("2", os.getenv("RXE_VM_NODES"))
    local ctx = support.open()
    assert.equal("::ffff:192.0.2." .. NODE, ctx:query_gid(1, 1))
    ctx:close()
  end)

  it("fabric_matrix.lua measures both ordered pairs and verifies the bytes", function()
    local json = ".cache/nodes-matrix.json"
    if NODE == 1 then os.remove(json) end
    -- thresholds no emulated pair misses: this spec is about the bytes, the 4-node one about verdicts
    local out, rc = run("fabric_matrix.lua", "-d rxe0 -n 100 -N 32 -S 16384 --reference median --lat-factor 100 "
      .. "--bw-fraction 0.01 --json " .. json)
    assert.equal(0, rc, out)
    if NODE ~= 1 then return end
    support.assert_matrix_pass(out, 2)
    local f = assert(io.open(json))
    local m = assert(dkjson.decode(f:read("a")))
    f:close()
    assert.is_true(m.pass)
    assert.equal(2, m.size)
    assert.same({ "node1", "node2" }, m.hosts)
    assert.equal("rxe-vm", m.options.launcher)
    assert.equal(2, #m.pairs)
    for _, p in ipairs(m.pairs) do
      assert.is_nil(p.error)
      assert.is_true(p.lat_us > 0 and p.write_mbs > 0 and p.send_mbs > 0, dkjson.encode(p))
      -- the last ping, one RDMA write buffer, the 32 send buffers
      assert.equal(8 + 16384 + 32 * 16384, p.verified_bytes)
      assert.is_true(p.data_ok)
    end
    assert.equal(1, m.pairs[1].dst + m.pairs[2].dst)
  end)

  it("fabric_check.lua passes across the nodes: ports, MTU, link layer, RC and UD both ways", function()
    local out, rc = run("fabric_check.lua", "-d rxe0")
    assert.equal(0, rc, out)
    if NODE ~= 1 then return end
    assert.matches("fabric: 2 ranks %(rxe%-vm launcher%)", out)
    assert.matches("consistent mtu%s+PASS 1024", out)
    assert.matches("RC rank 0 %(node1%)%s+<%-> rank 1 %(node2%)%s+PASS", out)
    assert.matches("UD rank 0 %(node1%)%s+<%-> rank 1 %(node2%)%s+PASS", out)
    assert.matches("fabric: 1 pairs x RC, UD; PASS", out)
  end)

  -- node 1 drops node 2's UD datagrams on arrival (tc ingress: u32 on the BTH opcode 0x64, UD
  -- SEND_ONLY, from 192.0.2.2): a loss rxe cannot see or retry, as on a wire.  (Dropped on node
  -- 2's egress instead, rxe takes it for congestion and sends the packet again, forever.)
  it("fabric_check.lua passes a lossy UD path with its counts and fails a broken one, by direction", function()
    local filter = "tc filter add dev eth0 parent ffff: protocol ip prio 1 u32 match u8 0x64 0xff at 28 " ..
      "match ip src 192.0.2.2/32 action "
    local ok, err = pcall(function()
      if NODE == 1 then
        assert.is_true(sh("tc qdisc add dev eth0 ingress"))
        assert.is_true(sh(filter .. "gact pass random determ drop 10")) -- every 10th
      end
      local out, rc = run("fabric_check.lua", "-d rxe0")
      assert.equal(0, rc, out)
      if NODE == 1 then
        assert.matches("UD rank 0 %(node1%)%s+<%-> rank 1 %(node2%)%s+PASS  10/10, 9/10  lossy but working: " ..
          "rank 1 %(node2%) %-> rank 0 %(node1%): 9 of 10 datagrams arrived %(10%% lost, limit 20%%%)", out)
        assert.matches("fabric: 1 pairs x RC, UD; PASS", out)
        assert.is_true(sh("tc filter del dev eth0 parent ffff: && " .. filter .. "drop")) -- every one
      end
      out, rc = run("fabric_check.lua", "-d rxe0")
      assert.equal(1, rc, out)
      if NODE == 1 then
        assert.matches("RC rank 0 %(node1%)%s+<%-> rank 1 %(node2%)%s+PASS", out)
        assert.matches("UD rank 0 %(node1%)%s+<%-> rank 1 %(node2%)%s+FAIL  10/10, 0/20  " ..
          "rank 1 %(node2%) %-> rank 0 %(node1%): 0 of 20 datagrams arrived %(100%% lost, limit 20%%%)", out)
      end
    end)
    if NODE == 1 then sh("tc qdisc del dev eth0 ingress") end
    assert(ok, err)
  end)

  it("fabric_check.lua names node 2 and its pairs when node 2's link is down: exit 1 there, 0 on node 1", function()
    local ok, err = pcall(function()
      if NODE == 2 then
        assert.is_true(sh("ip link set eth0 down"))
        assert.equal("down", wait_port("down"))
      end
      local t0 = ibv.now()
      local out, rc = run("fabric_check.lua", "-d rxe0")
      assert.equal(NODE == 2 and 1 or 0, rc, out)
      assert.is_true(ibv.now() - t0 < 60, "took " .. (ibv.now() - t0) .. " s")
      if NODE == 1 then
        assert.matches("rank 1 %(node2%)%s+rxe0 port 1: down", out)
        assert.matches("RC rank 0 %(node1%)%s+<%-> rank 1 %(node2%)%s+FAIL", out)
        assert.matches("UD rank 0 %(node1%)%s+<%-> rank 1 %(node2%)%s+FAIL", out)
        assert.matches("FAULT rank 1 %(node2%): port_state: port is down.*pairs: node1<%->node2 RC, node1<%->node2 UD",
          out)
        assert.not_matches("FAULT rank 0", out)
        assert.matches("FAIL; nodes at fault %(exit 1%): rank 1 %(node2%)\n", out)
      else
        assert.matches("rank 1 %(node2%): 6 local checks, 6 failed", out)
      end
      -- --exit-any: today's rule, 1 everywhere
      out, rc = run("fabric_check.lua", "-d rxe0 --exit-any")
      assert.equal(1, rc, out)
    end)
    if NODE == 2 then
      sh("ip link set eth0 up")
      assert.equal("active", wait_port("active"))
    end
    assert(ok, err)
  end)

  it("fabric_check.lua lists node 2's idle second device (rxe9 on a netdev that is down): exit 0 on both", function()
    local ok, err = pcall(function()
      if NODE == 2 then assert.is_true(sh("ip link add d9 type dummy && rdma link add rxe9 type rxe netdev d9")) end
      local out, rc = run("fabric_check.lua", "")
      assert.equal(0, rc, out)
      if NODE == 1 then
        assert.matches("rank 1 %(node2%)%s+rxe0 port 1: active.-\n%s+idle: rxe9:1 down %(ethernet%)\n", out)
        assert.matches("fabric: 1 pairs x RC, UD; PASS\n", out)
      else
        assert.matches("rank 1 %(node2%): 6 local checks, 0 failed", out)
      end
    end)
    if NODE == 2 then sh("rdma link delete rxe9; ip link delete d9") end
    assert(ok, err)
  end)

  it("--expect in both tools: node 2's MTU lowered, node 2 alone named, expected and found, exit 1 there", function()
    local file = "/tmp/expect-nodes.json" -- each VM's own /tmp, the same path and text on both
    local fh = assert(io.open(file, "w"))
    fh:write('{"hosts": {"node[1-2]": {"ports": [{"device": "rxe0", "port": 1, "active_mtu": 1024, '
      .. '"link_layer": "ethernet", "gid_type": "roce_v2"}]}}}')
    fh:close()
    local ok, err = pcall(function()
      local out, rc = run("fabric_check.lua", "--expect " .. file)
      assert.equal(0, rc, out)
      if NODE == 2 then
        assert.is_true(sh("ip link set eth0 mtu 1000"))
        local ctx = support.open()
        local deadline = ibv.now() + 10
        while ctx:query_port(1).active_mtu ~= 512 and ibv.now() < deadline do sh("sleep 0.2") end
        assert.equal(512, ctx:query_port(1).active_mtu)
        ctx:close()
      end
      out, rc = run("fabric_check.lua", "--expect " .. file)
      assert.equal(NODE == 2 and 1 or 0, rc, out)
      if NODE == 1 then
        assert.matches("FAULT rank 1 %(node2%): expect: rxe0 port 1 %(/tmp/expect%-nodes%.json%): active_mtu: "
          .. "expected 1024, found 512", out)
        assert.not_matches("FAULT rank 0", out)
        assert.matches("nodes at fault %(exit 1%): rank 1 %(node2%)\n", out)
      end
      -- fabric_matrix.lua applies the same file: node 2 named, its pairs still measured
      out, rc = run("fabric_matrix.lua", "-d rxe0 -n 100 -N 32 -S 16384 --reference median --lat-factor 100 "
        .. "--bw-fraction 0.01 --expect " .. file)
      assert.equal(NODE == 2 and 1 or 0, rc, out)
      if NODE == 1 then
        assert.matches("VERDICT node: rank 1 %(node2%) rxe0:1: expect: rxe0 port 1 %(/tmp/expect%-nodes%.json%): "
          .. "active_mtu: expected 1024, found 512", out)
        assert.not_matches("VERDICT node: rank 0", out)
        assert.matches("FAIL; nodes at fault %(exit 1%): rank 1 %(node2%)\n", out)
        assert.matches("2 pairs, %d+ bytes verified, %d+ flagged", out) -- (noise flags; the retest judges)
      end
    end)
    if NODE == 2 then sh("ip link set eth0 mtu 1500") end
    os.remove(file)
    assert(ok, err)
  end)
end)
