-- lua/ibverbs/bringup/matrix/pair_traffic.lua with flows, on a stand-in for
-- the verbs (no device): the kernels a round gives ibv.kernels (one flow:
-- the calls fabric_matrix made before flows; N flows: every flow's
-- ping-pong one after the other with its share of the round trips, an
-- end's within one time limit, the writes at once, each end's sends after
-- all its writes, the rails in calls of 64 kernels at most, the ping-pongs
-- apart past 12 flows); each flow connected with its label and hop limit
-- 64; the ring's every slot received into; the figures of each flow and of
-- the pair (a stall counted, a failed flow named).  The device's own run
-- is spec/nodes/flow_sport_spec.lua's.
local traffic = require "ibverbs.bringup.matrix.pair_traffic"
local flows = require "ibverbs.bringup.matrix.flows"

-- samples as ibv.samples keeps them: a buffer a kernel fills, or a list given
local function samples(x)
  local s = { v = type(x) == "table" and { table.unpack(x) } or {} }
  function s.count() return #s.v end
  function s.get(_, i) return s.v[i] end
  function s.sorted(_, i)
    local c = { table.unpack(s.v) }
    table.sort(c)
    return c[i]
  end
  function s.stats()
    local c = { table.unpack(s.v) }
    table.sort(c)
    return { median = c[math.floor((#c + 1) / 2)], p99 = c[#c], p99_9 = c[#c], max = c[#c] }
  end
  return s
end

-- The stand-in: every ibv.kernels call recorded; kernel figures from fig(k) (default: a clean run).
local function fake(fig)
  local ibv = { calls = {}, qpn = 100 }
  local function list(n)
    local l = { n = n, wrs = {} }
    function l.set(_, i, wr) l.wrs[i] = wr end
    function l.fill() end
    return l
  end
  ibv.send_wrs, ibv.recv_wrs, ibv.samples, ibv.now = list, list, samples, os.clock
  ibv.roce_udp_sport = require("ibverbs").roce_udp_sport
  function ibv.kernels(ks)
    ibv.calls[#ibv.calls + 1] = ks
    local out = {}
    for i, k in ipairs(ks) do
      local f = fig and fig(k) or nil
      if not f then
        f = { seconds = 0.01, samples = k.kernel == "lat_send" and k.iters - 1 or 0 }
        if k.samples then for t = 1, k.iters - 1 do k.samples.v[t] = 10e-6 + t * 1e-9 end end
      end
      out[i] = f
    end
    return out
  end
  return ibv
end

local function mr() return { addr = 4096, rkey = 7, write = function() end, read = function() return "" end } end

local function rail(ibv, index)
  local r = { index = index, port = 1, gid_index = 1, gid = "::ffff:10.0.0." .. index, mtu = 1024, lid = 0,
    cq = {}, out_lat = mr(), out_buf = mr(), in_lat = mr(), in_buf = mr(), ring = mr() }
  r.pd = { create_qp = function()
    ibv.qpn = ibv.qpn + 1
    local qp = { qp_num = ibv.qpn, recvs = 0 }
    function qp.post_recv() qp.recvs = qp.recvs + 1; return true end
    function qp.connect(_, rem, opts) qp.rem, qp.opts = rem, opts; return true end
    function qp.close() qp.closed = true end
    return qp
  end }
  return r
end

local O = { lat_size = 8, lat_iters = 500, bw_size = 65536, bw_iters = 1000, timeout = 30, qp_timeout = 14,
  wait = "spin" }
local function opts(extra)
  local o = {}
  for k, v in pairs(O) do o[k] = v end
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

-- A round of rank 0 on nrails rails: an out end to rank 1 and an in end from rank 1 on each, connected.
local function round(o, nrails, fig)
  local ibv = fake(fig)
  local tr = traffic.new{ o = o, ibv = ibv, me = 0, block = 1 }
  local ends = {}
  for k = 1, nrails do
    local r = rail(ibv, k)
    for _, kind in ipairs({ "out", "in" }) do
      local e = tr:new_end(r, kind, 1)
      local qpns = {}
      for j = 1, #e.qps do qpns[j] = 5000 + 10 * k + j end
      tr:connect(e, { qpn = qpns[1], qpns = #qpns > 1 and qpns or nil, psn = 1, lid = 0, mtu = 1024,
        gid = "::ffff:10.0.1." .. k, addr = 8192, rkey = 9 })
      ends[#ends + 1] = e
    end
  end
  tr:run(ends)
  return ibv, ends
end

local function kinds(ks)
  local t = {}
  for i, k in ipairs(ks) do t[i] = k.kernel end
  return t
end

describe("pair_traffic with flows", function()
  it("gives one flow the kernels fabric_matrix ran before flows: one call, one QP an end, no label", function()
    local ibv, ends = round(opts{ flows = 1 }, 2)
    assert.equal(1, #ibv.calls)
    local ks = ibv.calls[1]
    -- rail 1's out and in ping-pongs, rail 2's, then the in ends' receives, then each out end's write and send
    assert.same({ "lat_send", "lat_send", "lat_send", "lat_send", "bw", "bw", "bw", "bw", "bw", "bw" }, kinds(ks))
    assert.same({ nil, 1, 2, 3 }, { ks[1].after, ks[2].after, ks[3].after, ks[4].after })
    assert.equal(500, ks[1].iters)
    assert.same({ 1, 2, 3, 4 }, ks[5].after)
    assert.equal(7, ks[8].after) -- the send after its end's write
    assert.equal(1000, ks[7].iters)
    for _, e in ipairs(ends) do
      assert.equal(1, #e.qps)
      assert.is_nil(e.qps[1].opts.flow_label)
      assert.equal(64, e.qps[1].opts.hop_limit)
      assert.is_nil(e.flow_figs) -- no flow lines: the output as before flows
    end
    assert.is_number(ends[1].res.lat_us)
    assert.near(65536 * 1000 / 0.01 / 1e6, ends[1].res.write_mbs, 1e-6)
  end)

  it("spreads eight flows: labels and ports of their own, round trips and messages split, writes at once",
    function()
      local ibv, ends = round(opts{ flows = 8 }, 1)
      assert.equal(1, #ibv.calls) -- 40 kernels
      local ks = ibv.calls[1]
      assert.equal(40, #ks)
      local iters, labels, ports = 0, {}, {}
      for i = 1, 16 do
        assert.equal("lat_send", ks[i].kernel)
        if i > 1 then assert.equal(i - 1, ks[i].after) end
        if i % 2 == 1 then iters = iters + ks[i].iters end
      end
      assert.equal(500, iters) -- the out end's round trips: 500 in all, not 8 x 500
      -- each end's flows within one --timeout from its first flow's start: the out end's 1 to 8, the in end's 9 to 16
      for i = 1, 16 do
        local first = i < 9 and 1 or 9
        if i == first then assert.is_nil(ks[i].within) else assert.equal(first, ks[i].within) end
      end
      local out, inn = ends[1], ends[2]
      -- the labels of pair 0 -> 1 (the out end's; rank 1's in end takes the same: the same port both ways),
      -- and of 1 -> 0 (this in end's)
      local want_out, want_in = flows.labels(0, 1, 1, 8), flows.labels(1, 0, 1, 8)
      for j = 1, 8 do
        local l = out.qps[j].opts.flow_label
        assert.equal(want_out[j], l)
        assert.equal(want_in[j], inn.qps[j].opts.flow_label)
        assert.is_nil(labels[l]); labels[l] = true
        local p = out.flow_figs[j].sport
        assert.equal(0xc000 + l, p)
        assert.is_nil(ports[p]); ports[p] = true
        assert.same({ src = "10.0.0.1", dst = "10.0.1.1" }, { src = out.flow_figs[j].src, dst = out.flow_figs[j].dst })
      end
      -- the in end's receives (8), the out end's writes (8, after the ping-pongs), its sends (after every write)
      local writes = {}
      for i = 17, 24 do assert.is_nil(ks[i].send_wrs); assert.equal(128, ks[i].iters) end
      for i = 25, 32 do assert.equal(16, #ks[i].after); writes[#writes + 1] = i end
      for i = 33, 40 do assert.same(writes, ks[i].after) end
      -- each flow its figures; the pair's latency over all of them, its bandwidth the flows' bytes over the slowest
      for j = 1, 8 do
        local fig = out.flow_figs[j]
        assert.is_true(fig.samples >= 61 and fig.samples <= 62)
        assert.equal(0, fig.stalls)
        assert.near(65536 * 128 / 0.01 / 1e6, fig.write_mbs, 1e-6)
      end
      assert.near(65536 * 1024 / 0.01 / 1e6, out.res.write_mbs, 1e-6)
      assert.is_number(out.res.lat_us)
    end)

  it("gives a flow one chain of messages at least (flows.MIN_BW)", function()
    assert.equal(traffic.CHAIN, flows.MIN_BW)
    for n = 1, flows.MAX do
      local s = traffic.sizes(opts{ flows = n, bw_iters = flows.MIN_BW * n })
      assert.equal(traffic.CHAIN, s.flow_bw_iters)
      assert.equal(s.bw_iters, n * s.flow_bw_iters)
    end
  end)

  it("receives into every slot of the ring with its flows together, whatever their number", function()
    for _, n in ipairs({ 2, 3, 5, 8, 16 }) do
      for _, bw_iters in ipairs({ 8, 24, 1000 }) do
        local o = opts{ flows = n, bw_iters = bw_iters }
        local s = traffic.sizes(o)
        local tr = traffic.new{ o = o, ibv = fake(), me = 0, block = 1 }
        local e = { rail = { ring = "ring" } }
        local seen = {}
        for j = 1, n do
          local rl = tr:rx_list(e, j)
          assert.equal(s.ring_wrs, rl.n)
          -- a flow's messages land in its receives in turn (wr_id w - 1: the kernel posts it again)
          for w = 1, math.min(rl.n, s.flow_bw_iters) do
            assert.equal(w - 1, rl.wrs[w].wr_id)
            assert.equal(o.bw_size, rl.wrs[w].sge.length)
            seen[rl.wrs[w].sge.offset / o.bw_size] = true
          end
        end
        for slot = 0, s.ring_n - 1 do assert.is_true(seen[slot], n .. " flows, slot " .. slot) end
      end
    end
  end)

  it("runs the rails in calls of 64 kernels at most, the ping-pongs apart past 12 flows", function()
    local ibv = round(opts{ flows = 8 }, 3)
    assert.equal(3, #ibv.calls) -- 40 kernels a rail
    for _, ks in ipairs(ibv.calls) do assert.equal(40, #ks) end
    ibv = round(opts{ flows = 2 }, 7)
    assert.same({ 60, 10 }, { #ibv.calls[1], #ibv.calls[2] }) -- 6 rails of 10 kernels, then 1
    ibv = round(opts{ flows = 16 }, 1)
    assert.same({ 32, 48 }, { #ibv.calls[1], #ibv.calls[2] })
    assert.is_nil(ibv.calls[2][1].after) -- the ping-pongs are over: the bandwidth needs no after
  end)

  it("counts a flow's stalls and names a failed flow, the pair's error its first failure", function()
    local n, failed = 0, false
    local _, ends = round(opts{ flows = 4 }, 1, function(k)
      if k.kernel == "lat_send" and k.initiator then
        n = n + 1
        for t = 1, k.iters - 1 do k.samples.v[t] = 10e-6 end
        if n == 2 then k.samples.v[3], k.samples.v[9] = 0.070, 0.069 end -- two frames lost: an ack timeout each
        return { seconds = 0.01, samples = k.iters - 1 }
      end
      -- the out end's QPs are 101 to 104: flow 3's first bandwidth kernel, its writes, fails
      if k.kernel == "bw" and k.send_wrs and k.qp.qp_num == 103 and not failed then
        failed = true
        return { seconds = 1, error = "completion: transport retry counter exceeded" }
      end
    end)
    local out = ends[1]
    -- 0.070 s and 0.069 s: over half the ack timeout (67 ms at 14), and over 100 x the median
    assert.same({ 0, 2, 0, 0 }, { out.flow_figs[1].stalls, out.flow_figs[2].stalls, out.flow_figs[3].stalls,
      out.flow_figs[4].stalls })
    assert.equal(124, out.flow_figs[2].samples)
    assert.equal("RDMA write bandwidth: completion: transport retry counter exceeded", out.flow_figs[3].error)
    assert.is_nil(out.flow_figs[3].write_mbs)
    assert.is_number(out.flow_figs[3].send_mbs)
    assert.is_number(out.flow_figs[1].write_mbs)
    assert.equal("flow 3: RDMA write bandwidth: completion: transport retry counter exceeded", out.res.error)
    assert.is_nil(out.res.write_mbs) -- not every flow's bytes arrived
    assert.is_number(out.res.send_mbs)
  end)
end)
