-- Run on every node of `tools/rxe-vm --nodes 2` (tools/run-tests): the
-- RoCE v2 UDP source ports the module computes are the ports on the wire.
-- Each node captures what its eth0 carries to and from port 4791 (a packet
-- socket: spec/nodes/roce_capture.c, compiled here), the base transport
-- header telling each packet's destination QP.  First three RC connections
-- between the nodes' rxe0, RDMA writes both ways: with a flow label below
-- 0x4000, one above it (folded), and none (label 0: the kernel's port from
-- both QP numbers, the same both ways); every packet each QP sends, data
-- or acks, carries ibv.roce_udp_sport(label, its qpn, the peer's).  Then
-- fabric_matrix.lua --flows 4 --trace: the ports the report gives its
-- flows are exactly the ports seen from the peer and sent to it, each flow
-- traced with its own port and no hop on this one segment.
local ibv = require "ibverbs"
local support = require "support"
local dkjson = require "dkjson"
local fabric = require "ibverbs.fabric"

local NODE = tonumber(os.getenv("RXE_VM_NODE") or "0")
local CAPTURE = "/tmp/roce_capture"

-- Starts the capture of eth0 (compiled once); returns a function that stops it and gives its packets:
-- {dir =, src =, dst =, sport =, dqpn =, opcode =} (dqpn -1: too short for a BTH, a trace's probe); none dropped.
local function capture()
  if not support.slurp(CAPTURE) then
    local out, rc = support.capture("cc -std=c11 -D_GNU_SOURCE -O1 -Wall -Wextra -Werror -o " .. CAPTURE ..
      " spec/nodes/roce_capture.c")
    assert(rc == 0, out)
  end
  local file = os.tmpname()
  os.remove(file .. ".stop"); os.remove(file .. ".ready")
  local h = support.spawn(CAPTURE .. " eth0 " .. file .. " 240")
  local deadline = ibv.now() + 20
  while not support.slurp(file .. ".ready") and ibv.now() < deadline do require("socket").sleep(0.05) end
  assert(support.slurp(file .. ".ready"), "the capture did not start")
  return function()
    io.open(file .. ".stop", "w"):close()
    local out, rc = h:wait(20)
    assert(rc == 0, out)
    local pkts, text = {}, support.slurp(file) or ""
    assert.equal("0", text:match("drops (%d+)\n$"), "the capture's drops")
    for l in text:gmatch("[^\n]+") do
      local dir, src, dst, sport, dqpn, op = l:match("^(%S+) (%S+) (%S+) (%d+) (%-?%d+) (%-?%d+)$")
      if dir then
        pkts[#pkts + 1] = { dir = dir, src = src, dst = dst, sport = tonumber(sport), dqpn = tonumber(dqpn),
          opcode = tonumber(op) }
      end
    end
    os.remove(file); os.remove(file .. ".stop"); os.remove(file .. ".ready")
    return pkts
  end
end

describe("RoCE v2 source ports on the wire between two rxe nodes", function()
  it("runs under tools/rxe-vm --nodes 2 with rxe0 on eth0", function()
    assert.is_true(NODE == 1 or NODE == 2, "RXE_VM_NODE is " .. tostring(os.getenv("RXE_VM_NODE")))
  end)

  it("puts the label's port, or the QP numbers', on every packet a QP sends", function()
    local stop = capture()
    local f = assert(fabric.init{ timeout = 120 })
    local ctx = support.open()
    local pd = assert(ctx:alloc_pd())
    local cq = assert(ctx:create_cq(64))
    local access = { "local_write", "remote_write" }
    local mr = assert(pd:reg_mr(4096, access))
    local labels = { 0x1234, 0x54321, 0 }
    local qps, qpns = {}, {}
    for i = 1, 3 do
      qps[i] = assert(pd:create_qp{ qp_type = "rc", send_cq = cq, recv_cq = cq,
        cap = { max_send_wr = 16, max_recv_wr = 4, max_send_sge = 1, max_recv_sge = 1 } })
      qpns[i] = qps[i].qp_num
    end
    local all = assert(f:allgather({ gid = ctx:query_gid(1, support.GID_INDEX), addr = mr.addr, rkey = mr.rkey,
      qpns = qpns }))
    local peer = all[(f.rank == 0 and 1 or 0) + 1]
    for i, qp in ipairs(qps) do
      assert(qp:connect({ qpn = peer.qpns[i], psn = 0, gid = peer.gid }, { port_num = support.PORT,
        sgid_index = support.GID_INDEX, qp_access_flags = access, path_mtu = 1024, hop_limit = 64,
        flow_label = labels[i] ~= 0 and labels[i] or nil }))
    end
    assert(f:barrier())
    for _, qp in ipairs(qps) do
      for w = 1, 4 do
        assert(qp:post_send{ wr_id = w, opcode = "rdma_write", sge = { mr = mr, length = 256 },
          remote_addr = peer.addr, rkey = peer.rkey, send_flags = { "signaled" } })
      end
    end
    for _, wc in ipairs(support.completions(cq, 12, 30)) do assert.equal("success", wc.status) end
    assert(f:barrier()) -- the peer's writes acknowledged too
    local pkts = stop()
    f:close()
    -- each QP's port by the rule, from this end and from the peer's
    local mine, theirs = {}, {}
    for i = 1, 3 do
      mine[i] = ibv.roce_udp_sport(labels[i], qpns[i], peer.qpns[i])
      theirs[i] = ibv.roce_udp_sport(labels[i], peer.qpns[i], qpns[i])
    end
    assert.equal(0xc000 + 0x1234, mine[1])
    assert.equal(49972, mine[2]) -- 0x54321: its low 14 bits 801, its high 6 bits 21: 801 xor 21 = 820
    assert.equal(mine[3], theirs[3]) -- label 0: the same port both ways
    local seen, wrong = {}, {}
    for _, p in ipairs(pkts) do
      for i = 1, 3 do
        local want
        if p.dir == "out" and p.dqpn == peer.qpns[i] then want = mine[i] end
        if p.dir == "in" and p.dqpn == qpns[i] then want = theirs[i] end
        if want then
          local k = p.dir .. i
          seen[k] = (seen[k] or 0) + 1
          if p.sport ~= want then wrong[#wrong + 1] = dkjson.encode(p) .. " wanted " .. want end
        end
      end
    end
    assert.same({}, wrong)
    for i = 1, 3 do
      -- four writes a QP each way, and their acks
      assert.is_true((seen["out" .. i] or 0) >= 4 and (seen["in" .. i] or 0) >= 4, dkjson.encode(seen))
    end
    for _, qp in ipairs(qps) do qp:close() end
    ctx:close()
  end)

  it("gives fabric_matrix's flows the ports they have on the wire, traced with their own ports", function()
    local json = ".cache/nodes-flows.json"
    if NODE == 1 then os.remove(json) end
    local stop = capture()
    local out, rc = support.run("timeout 200 " .. support.example("fabric_matrix.lua", "-d rxe0 -n 100 -N 32 -S 1024 "
      .. "--reference median --lat-factor 100 --bw-fraction 0.01 --flows 4 --trace --json " .. json))
    local pkts = stop()
    assert.equal(0, rc, out)
    if NODE ~= 1 then return end
    local fh = assert(io.open(json))
    local m = assert(dkjson.decode(fh:read("a")))
    fh:close()
    assert.equal(4, m.options.flows)
    local ports, sent = {}, {} -- every flow's port (both pairs); node 1's own flows' (pair 0 -> 1)
    for _, p in ipairs(m.pairs) do
      assert.equal(4, #p.flows)
      for j, fl in ipairs(p.flows) do
        assert.equal(j, fl.flow)
        assert.same({ p.src, p.dst, "192.0.2." .. (p.src + 1), "192.0.2." .. (p.dst + 1), 4791 },
          { fl.a, fl.b, fl.src, fl.dst, fl.dport })
        assert.equal(ibv.roce_udp_sport(fl.flow_label), fl.sport)
        assert.same({}, fl.hops) -- one segment: no router, and the peer's rxe answers nothing on 4791
        assert.is_true(fl.samples > 0 and fl.write_mbs > 0 and fl.send_mbs > 0, dkjson.encode(fl))
        assert.is_nil(fl.failed)
        ports[fl.sport] = true
        if fl.a == 0 then sent[fl.sport] = true end
      end
    end
    local from_peer, to_peer, probes = {}, {}, {}
    for _, p in ipairs(pkts) do
      if p.dqpn >= 0 and p.dir == "in" and p.src == "192.0.2.2" then from_peer[p.sport] = true end
      if p.dqpn >= 0 and p.dir == "out" and p.dst == "192.0.2.2" then to_peer[p.sport] = true end
      if p.dqpn < 0 and p.dir == "out" then probes[p.sport] = true end
    end
    -- the peer's data and its acks of ours: its flows' and ours' (one label, one port, both ways)
    assert.same(ports, from_peer)
    assert.same(ports, to_peer)
    assert.same(sent, probes) -- the trace's probes: this node's flows' own ports
  end)
end)
