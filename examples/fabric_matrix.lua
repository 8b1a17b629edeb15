#!/usr/bin/env lua5.4
--- fabric_matrix.lua: the all-pairs test to run after racking a cluster.  One
-- process per host (or per device), started by the launcher the cluster
-- already has (srun, mpirun, tools/rxe-vm --nodes) or with --rank/--size;
-- rank 0 collects.  For every ordered pair of ranks, one pair at a time: an RC
-- connection of its own, ping-pong latency (sends of --lat-size bytes), RDMA
-- write and send bandwidth (--bw-size bytes), and a data check of what arrived.
--   srun -N 4 --ntasks-per-node=1 lua5.4 examples/fabric_matrix.lua --json m.json --plot m.png
--   mpirun -np 4 lua5.4 examples/fabric_matrix.lua
--   tools/rxe-vm --nodes 2 lua5.4 examples/fabric_matrix.lua
-- Rank 0 prints the matrices, writes --json and --plot (png or svg, gnuplot),
-- flags the pairs below --threshold of the median (or failing), and every rank
-- exits 1 when one is flagged.
local ibv = require "ibverbs"
local fabric = require "ibverbs.fabric"
package.path = arg[0]:gsub("[^/]*$", "") .. "lib/?.lua;" .. package.path -- examples/lib
local cli = require "cli"
local matrix = require "matrix"

local o = cli.run(arg, {
  name = "fabric_matrix.lua", usage = { "            one process per rank; the launcher gives rank and size" },
  cli.ib_dev{ help = "use IB device <dev> (default first device found)" },
  cli.ib_port(),
  cli.gid_idx{ default = false, min = 0,
               help = "GID index (default: the first RoCE v2 IPv4 GID, else 0)" },
  { "s", "lat-size", arg = "bytes", type = "int", default = 8, min = 1, max = 4096,
    help = "ping-pong message size (default 8)" },
  { "n", "lat-iters", arg = "n", type = "int", default = 500, min = 1, help = "ping-pong round trips (default 500)" },
  { "S", "bw-size", arg = "bytes", type = "int", default = 65536, min = 1,
    help = "bandwidth message size (default 65536)" },
  { "N", "bw-iters", arg = "n", type = "int", default = 200, min = 1, help = "bandwidth messages (default 200)" },
  { "T", "threshold", arg = "fraction", type = "number", default = 0.5, min = 0,
    help = "flag pairs below <fraction> of the median (default 0.5)" },
  { "t", "timeout", arg = "seconds", type = "number", default = 30, min = 1,
    help = "limit of every wait: completions, rendezvous, barriers (default 30)" },
  { nil, "json", arg = "file", help = "write the results as JSON to <file> (rank 0)" },
  { nil, "plot", arg = "file", help = "draw heatmaps into <file>.png or .svg with gnuplot (rank 0)" },
  { nil, "rank", arg = "rank", type = "int", min = 0, help = "this process's rank (default: from the launcher)" },
  { nil, "size", arg = "n", type = "int", min = 1, help = "the number of ranks (default: from the launcher)" },
  { nil, "root", arg = "host[:port]", help = "rank 0's address (default: IBV_FABRIC_ROOT or the launcher's)" },
  { nil, "fabric-port", arg = "port", type = "int", help = "rendezvous TCP port (default 18600)" },
})

local ACCESS = { "local_write", "remote_write" }
local RING = 16 -- receives posted for the send bandwidth
local CHAIN = 8 -- send WRs per post, one signaled

local function say(...) io.stderr:write(string.format(...), "\n") end

local f, ferr = fabric.init{ rank = o.rank, size = o.size, root = o.root, port = o.fabric_port,
  timeout = o.timeout + 15 }
if not f then
  say("fabric_matrix: %s", ferr)
  os.exit(1)
end
local function collective(ok, err)
  if ok == nil then
    say("fabric_matrix (%s): %s", f:name(f.rank), err)
    os.exit(1)
  end
  return ok
end

-- ------------------------------------------------------------------ device

local function pick_gid(ctx, port, link_layer)
  if o.gid_idx then return o.gid_idx end
  if link_layer ~= "ethernet" then return 0 end
  for _, g in ipairs(ctx:query_gid_table() or {}) do
    if g.port_num == port and g.gid_type == "roce_v2" and g.gid:find("^::ffff:%d") then return g.gid_index end
  end
  return 0
end

local setup_err
local ctx, pd, port, gid_index, gid
do
  local err
  ctx, err = ibv.open(o.ib_dev)
  if ctx then
    port, err = ctx:query_port(o.ib_port)
  end
  if not ctx or not port then
    setup_err = "device: " .. tostring(err)
  elseif port.state ~= "active" then
    setup_err = string.format("%s port %d is %s", ctx:name(), o.ib_port, port.state)
  else
    gid_index = pick_gid(ctx, o.ib_port, port.link_layer)
    gid = ctx:query_gid(o.ib_port, gid_index)
    pd = assert(ctx:alloc_pd())
  end
end

local bw_iters = math.max(CHAIN, o.bw_iters - o.bw_iters % CHAIN)
local ring = math.min(RING, bw_iters)
local function pattern(src, dst, n)
  local t = {}
  for i = 0, 255 do t[#t + 1] = string.char((i * 7 + src * 31 + dst * 17 + 1) % 256) end
  local chunk = table.concat(t)
  return (string.rep(chunk, math.ceil(n / 256))):sub(1, n)
end

-- One RC QP per ordered pair and role: ends[peer + 1].out (this rank sends) and .into (it receives).
local function new_end()
  local e = { cq = assert(ctx:create_cq(2 * RING + 64)) }
  e.qp = assert(pd:create_qp{ qp_type = "rc", send_cq = e.cq, recv_cq = e.cq,
    cap = { max_send_wr = 64, max_recv_wr = RING + 4, max_send_sge = 1, max_recv_sge = 1 } })
  e.lat = assert(pd:reg_mr(2 * o.lat_size, ACCESS))
  e.buf = assert(pd:reg_mr(o.bw_size, ACCESS))
  e.wcs = ibv.wc_array(64)
  e.psn = math.random(0, 0xffffff)
  return e
end

local ends, info = {}, {}
for r = 0, f.size - 1 do
  if r ~= f.rank and not setup_err then
    local e = { out = new_end(), into = new_end() }
    e.into.ring = assert(pd:reg_mr(ring * o.bw_size, ACCESS))
    ends[r + 1] = e
    local function me(x) return { qpn = x.qp.qp_num, psn = x.psn, lid = port.lid, gid = gid, addr = x.buf.addr,
      rkey = x.buf.rkey } end
    info[r + 1] = { out = me(e.out), into = me(e.into), mtu = port.active_mtu }
  else
    info[r + 1] = { err = setup_err }
  end
end

-- every rank learns every other rank's QP info, then connects its ends
local remote = collective(f:alltoall(info))
local connect_err = {}
for r = 0, f.size - 1 do
  local e, rem = ends[r + 1], remote[r + 1]
  if r ~= f.rank then
    if setup_err then
      connect_err[r + 1] = setup_err
    elseif rem.err then
      connect_err[r + 1] = f:name(r) .. ": " .. rem.err
    else
      local mtu = math.min(port.active_mtu, rem.mtu)
      for _, side in ipairs({ { e.out, rem.into }, { e.into, rem.out } }) do
        local re = side[2]
        local ok, err = side[1].qp:connect({ qpn = re.qpn, psn = re.psn, lid = re.lid, gid = re.gid },
          { port_num = o.ib_port, sgid_index = gid_index, qp_access_flags = ACCESS, path_mtu = mtu, psn = side[1].psn })
        if not ok then connect_err[r + 1] = "RC connect: " .. tostring(err); break end
      end
      e.out.rkey, e.out.raddr = rem.into.rkey, rem.into.addr
    end
  end
end
local all_connect = collective(f:allgather(connect_err))

-- ------------------------------------------------------------------ one pair

local function wait(e, n, what)
  local got, err = e.cq:wait(e.wcs, n, o.timeout)
  if not got then error(what .. ": " .. tostring(err), 0) end
  for i = 1, got do
    if e.wcs:status(i) ~= "success" then error(what .. ": completion " .. e.wcs:status(i), 0) end
  end
  if got < n then error(string.format("%s: %d of %d completions in %g s", what, got, n, o.timeout), 0) end
end

-- the sender's side of (me -> dst): latency, write and send bandwidth
local function send_side(dst, result)
  local e = ends[dst + 1].out
  local ping = pattern(f.rank, dst, o.lat_size)
  e.lat:write(0, ping)
  collective(f:barrier()) -- the receiver's first receive is posted
  local rwr = { wr_id = 1, sge = { mr = e.lat, offset = o.lat_size, length = o.lat_size } }
  local swr = { wr_id = 2, opcode = "send", send_flags = { "signaled" }, sge = { mr = e.lat, length = o.lat_size } }
  local start = ibv.now()
  for _ = 1, o.lat_iters do
    assert(e.qp:post_recv(rwr))
    assert(e.qp:post_send(swr))
    wait(e, 2, "ping-pong")
  end
  result.lat_us = (ibv.now() - start) / o.lat_iters / 2 * 1e6
  if e.lat:read(o.lat_size, o.lat_size) ~= ping then error("ping-pong: the echo differs from the ping", 0) end
  result.verified_bytes = result.verified_bytes + o.lat_size

  e.buf:write(0, pattern(f.rank, dst, o.bw_size))
  local wl = ibv.send_wrs(CHAIN)
  wl:fill{ opcode = "rdma_write", sge = { mr = e.buf, length = o.bw_size }, remote_addr = e.raddr, rkey = e.rkey }
  wl:set(CHAIN, { wr_id = CHAIN, opcode = "rdma_write", send_flags = { "signaled" },
    sge = { mr = e.buf, length = o.bw_size }, remote_addr = e.raddr, rkey = e.rkey })
  local st = assert(ibv.transfer{ send_qp = e.qp, send_cq = e.cq, send_wrs = wl, count = bw_iters, window = 32,
    timeout = o.timeout })
  result.write_mbs = o.bw_size * st.sent / st.seconds / 1e6
  collective(f:barrier()) -- the writes are in: the receiver checks them and posts its receives

  local sl = ibv.send_wrs(CHAIN)
  sl:fill{ opcode = "send", sge = { mr = e.buf, length = o.bw_size } }
  sl:set(CHAIN, { wr_id = CHAIN, opcode = "send", send_flags = { "signaled" },
    sge = { mr = e.buf, length = o.bw_size } })
  collective(f:barrier())
  st = assert(ibv.transfer{ send_qp = e.qp, send_cq = e.cq, send_wrs = sl, count = bw_iters, window = 32,
    timeout = o.timeout })
  result.send_mbs = o.bw_size * st.sent / st.seconds / 1e6
end

-- the receiver's side of (src -> me): echo, check the written and the sent bytes
local function recv_side(src, check)
  local e = ends[src + 1].into
  local want_ping = pattern(src, f.rank, o.lat_size)
  local rwr = { wr_id = 1, sge = { mr = e.lat, length = o.lat_size } }
  local swr = { wr_id = 2, opcode = "send", send_flags = { "signaled" },
    sge = { mr = e.lat, length = o.lat_size } }
  assert(e.qp:post_recv(rwr))
  collective(f:barrier())
  for i = 1, o.lat_iters do
    wait(e, 1, "ping-pong echo")
    if i < o.lat_iters then assert(e.qp:post_recv(rwr)) end
    assert(e.qp:post_send(swr))
    wait(e, 1, "ping-pong echo")
  end
  local ok_ping = e.lat:read(0, o.lat_size) == want_ping
  check.verified_bytes = check.verified_bytes + o.lat_size
  collective(f:barrier())
  local want = pattern(src, f.rank, o.bw_size)
  local ok_write = e.buf:read(0, o.bw_size) == want
  check.verified_bytes = check.verified_bytes + o.bw_size
  local rl = ibv.recv_wrs(ring)
  rl:fill{ sge = { mr = e.ring, length = o.bw_size }, stride = o.bw_size }
  assert(e.qp:post_recv(rl))
  collective(f:barrier())
  assert(ibv.transfer{ recv = e.qp, recv_cq = e.cq, recv_wrs = rl, count = bw_iters, timeout = o.timeout })
  local ok_send = true
  for i = 0, ring - 1 do
    ok_send = ok_send and e.ring:read(i * o.bw_size, o.bw_size) == want
    check.verified_bytes = check.verified_bytes + o.bw_size
  end
  check.data_ok = ok_ping and ok_write and ok_send
  if not check.data_ok then
    check.error = "data check failed:" .. (ok_ping and "" or " ping") .. (ok_write and "" or " rdma_write") ..
      (ok_send and "" or " send")
  end
end

-- ------------------------------------------------------------------ all pairs

-- Each pair uses three barriers on both sides; a side that fails still joins
-- them (the rest of its work skipped), so every rank stays in step.
local BARRIERS = 3
local mine = {} -- results of the pairs this rank took part in, by "src-dst"
for src = 0, f.size - 1 do
  for dst = 0, f.size - 1 do
    if src ~= dst then
      local broken = all_connect[src + 1][dst + 1] or all_connect[dst + 1][src + 1]
      if f.rank == src or f.rank == dst then
        local r = { src = src, dst = dst, verified_bytes = 0 }
        mine[src .. "-" .. dst] = r
        local before = f.seq
        if broken then
          r.error = broken
        else
          local ok, err = pcall(f.rank == src and send_side or recv_side, f.rank == src and dst or src, r)
          if not ok then r.error = tostring(err) end
        end
        for _ = f.seq - before + 1, BARRIERS do collective(f:barrier()) end
      else
        for _ = 1, BARRIERS do collective(f:barrier()) end
      end
    end
  end
end

-- ------------------------------------------------------------------ report

local gathered = collective(f:gather(mine, 0))
local status = 0
if f.rank == 0 then
  local list = {}
  for src = 0, f.size - 1 do
    for dst = 0, f.size - 1 do
      if src ~= dst then
        local key = src .. "-" .. dst
        local s, d = gathered[src + 1][key] or {}, gathered[dst + 1][key] or {}
        local p = { src = src, dst = dst, src_host = f.hosts[src + 1], dst_host = f.hosts[dst + 1],
          lat_us = s.lat_us, write_mbs = s.write_mbs, send_mbs = s.send_mbs,
          verified_bytes = (s.verified_bytes or 0) + (d.verified_bytes or 0), data_ok = d.data_ok }
        local errs = {}
        if s.error then errs[#errs + 1] = f:name(src) .. ": " .. s.error end
        if d.error and d.error ~= s.error then errs[#errs + 1] = f:name(dst) .. ": " .. d.error end
        if #errs > 0 then p.error = table.concat(errs, "; ") end
        list[#list + 1] = p
      end
    end
  end
  local report = matrix.analyse(list, f.size, o.threshold)
  report.hosts = f.hosts
  report.options = { lat_size = o.lat_size, lat_iters = o.lat_iters, bw_size = o.bw_size, bw_iters = bw_iters,
    device = ctx and ctx:name() or o.ib_dev, gid_index = gid_index, launcher = f.launcher }
  print(matrix.text(report))
  if o.json then
    local fh = assert(io.open(o.json, "w"))
    fh:write(matrix.json(report), "\n")
    fh:close()
  end
  if o.plot then
    local ok, err = matrix.plot(report, o.plot)
    if not ok then say("fabric_matrix: %s", err); report.pass = false end
  end
  status = report.pass and 0 or 1
end
status = collective(f:bcast(status))
f:close()
os.exit(status)
