--- A stand-in for the ibverbs module (LUA_PATH='spec/fake-verbs/?.lua;lua/?.lua;;'),
-- for running examples/fabric_check.lua on a host without RDMA: the devices
-- and ports FAKE_VERBS names ("rxe0:1=active,rxe0:2=down,mlx5_0:1=active"),
-- each port in that state (InfiniBand, LID 1, one GID), and verbs that move
-- the bytes fabric_check's loopback checks send, write, read, swap and add
-- between its memory regions in this process.  No port counters, no events.
local ibv = {}

local PORTS, DEVS = {}, {}
for dev, port, state in (os.getenv("FAKE_VERBS") or ""):gmatch("([%w_.-]+):(%d+)=(%a+)") do
  if not PORTS[dev] then PORTS[dev] = {}; DEVS[#DEVS + 1] = { name = dev } end
  PORTS[dev][tonumber(port)] = state
end

function ibv.now() return os.clock() end
function ibv.devices() return DEVS end
function ibv.wc_array()
  return { status = function() return "success" end, opcode = function() return "send" end }
end

local mrs, qps = {}, {}
local next_addr, next_qpn = 0x100000, 100

-- The region holding addr, and addr's offset in it.
local function at(addr)
  for _, mr in ipairs(mrs) do
    if addr >= mr.addr and addr < mr.addr + mr.size then return mr, addr - mr.addr end
  end
  error("no region at " .. addr, 0)
end

local MR = {}
MR.__index = MR
function MR:write(off, s) for i = 1, #s do self.bytes[off + i] = s:byte(i) end end
function MR:read(off, n)
  local t = {}
  for i = 1, n do t[i] = string.char(self.bytes[off + i] or 0) end
  return table.concat(t)
end
function MR:u64(off, v)
  if v == nil then return self.words[off] or 0 end
  self.words[off] = v
end
function MR.close() return true end

local function done(cq) cq.pending = cq.pending + 1 end

-- One work request of qp, carried out at once.
local function carry(qp, wr)
  local sge, op = wr.sge, wr.opcode or "send"
  local off = sge.offset or 0
  if op == "send" then
    local dst = qps[qp.peer or wr.remote_qpn]
    local rec = table.remove(dst.recvs, 1)
    rec.sge.mr:write((rec.sge.offset or 0) + (dst.qp_type == "ud" and 40 or 0), sge.mr:read(off, sge.length))
    done(dst.recv_cq)
  elseif op == "rdma_write" then
    local mr, roff = at(wr.remote_addr)
    mr:write(roff, sge.mr:read(off, sge.length))
  elseif op == "rdma_read" then
    local mr, roff = at(wr.remote_addr)
    sge.mr:write(off, mr:read(roff, sge.length))
  else
    local mr, roff = at(wr.remote_addr)
    local old = mr:u64(roff)
    if op == "atomic_fetch_and_add" then mr:u64(roff, old + wr.compare_add)
    elseif old == wr.compare_add then mr:u64(roff, wr.swap) end
    sge.mr:u64(off, old)
  end
  for _, f in ipairs(wr.send_flags or {}) do
    if f == "signaled" then done(qp.send_cq) end
  end
  return true
end

local function new_qp(init)
  local qp = { qp_num = next_qpn, qp_type = init.qp_type, send_cq = init.send_cq, recv_cq = init.recv_cq, recvs = {} }
  next_qpn = next_qpn + 1
  qps[qp.qp_num] = qp
  function qp.connect(self, remote) self.peer = init.qp_type == "rc" and remote.qpn or nil; return true end
  function qp.post_recv(self, wr) self.recvs[#self.recvs + 1] = wr; return true end
  qp.post_send = carry
  function qp.close() return true end
  return qp
end

local function new_pd()
  return {
    reg_mr = function(_, size)
      local mr = setmetatable({ addr = next_addr, size = size, rkey = next_addr, bytes = {}, words = {} }, MR)
      next_addr = next_addr + 0x100000
      mrs[#mrs + 1] = mr
      return mr
    end,
    create_qp = function(_, init) return new_qp(init) end,
    create_ah = function() return {} end,
    close = function() return true end,
  }
end

function ibv.open(name)
  local ports = PORTS[name]
  if not ports then return nil, "no such device " .. tostring(name) end
  local n = 0
  for p in pairs(ports) do n = math.max(n, p) end
  return {
    name = function() return name end,
    query_device = function() return { phys_port_cnt = n, fw_ver = "0.0.0" } end,
    query_port = function(_, port)
      return { state = ports[port] or "down", active_mtu = 1024, max_mtu = 4096, link_layer = "infiniband", lid = 1 }
    end,
    query_gid_table = function()
      local t = {}
      for p in pairs(ports) do t[#t + 1] = { port_num = p, gid_index = 0, gid = "fe80::1", gid_type = "ib" } end
      return t
    end,
    query_gid = function() return "fe80::1" end,
    alloc_pd = new_pd,
    create_cq = function()
      return { pending = 0, close = function() return true end, wait = function(self, _, want)
        local got = math.min(self.pending, want)
        self.pending = self.pending - got
        return got
      end }
    end,
    get_async_event = function() return nil, "ibv_get_async_event: Connection timed out", 110 end,
    close = function() return true end,
  }
end

return ibv
