--- devinfo (`ibvlua devinfo`, examples/devinfo.lua): the Lua counterpart of
-- ibv_devinfo: devices, ports, states, MTU, GIDs.
--   ibvlua devinfo [-d rxe0] [-i 1] [-l] [-v]
local ibv = require "ibverbs"
local cli = require "ibverbs.tools.cli"

local devinfo = {}

-- The command line.
local function options(arg)
  return cli.run(arg, {
    name = "devinfo.lua", usage = { "            print the ca attributes" },
    cli.ib_dev{ help = "use IB device <dev> (default all devices)" },
    cli.ib_port{ default = false, help = "use port <port> of IB device (default all ports)" },
    { "l", "list", help = "print only the IB devices names" },
    { "v", "verbose", help = "print all the attributes of the IB device(s)" },
  })
end

local TRANSPORTS = { ib = "InfiniBand (0)", iwarp = "iWARP (1)", usnic = "usNIC (2)", usnic_udp = "usNIC UDP (3)",
                     unspecified = "unspecified (4)" }
local STATES = { nop = 0, down = 1, init = 2, armed = 3, active = 4, active_defer = 5 }
local MTU_ENUM = { [256] = 1, [512] = 2, [1024] = 3, [2048] = 4, [4096] = 5 }
local LINK = { infiniband = "InfiniBand", ethernet = "Ethernet" }
local ATOMIC = { none = "ATOMIC_NONE (0)", hca = "ATOMIC_HCA (1)", glob = "ATOMIC_GLOB (2)" }
local GID_TYPES = { ib = "IB/RoCE v1", roce_v1 = "IB/RoCE v1", roce_v2 = "RoCE v2" }

local function field(indent, name, value)
  -- values line up at column 40 (device) or 48 (port), as in ibv_devinfo
  local label = name .. ":"
  local col, target, tabs = indent * 8 + #label, indent == 1 and 40 or 48, 0
  repeat
    col, tabs = (math.floor(col / 8) + 1) * 8, tabs + 1
  until col >= target
  print(string.rep("\t", indent) .. label .. string.rep("\t", tabs) .. tostring(value))
end

local function mtu(bytes) return string.format("%d (%d)", bytes, MTU_ENUM[bytes] or 0) end

local function print_flags(names)
  for _, n in ipairs(names) do print("\t\t\t\t\t" .. n:upper()) end
end

-- 64-bit values: integers on Lua 5.4, doubles on LuaJIT (where 2^64 means all ones)
local function hex64(v)
  if math.type and math.type(v) == "integer" then return string.format("0x%x", v) end
  if v >= 2 ^ 64 then return "0xffffffffffffffff" end
  local hi = math.floor(v / 2 ^ 32)
  if hi == 0 then return string.format("0x%x", v) end
  return string.format("0x%x%08x", hi, v - hi * 2 ^ 32)
end

local function device_verbose(ctx, a)
  field(1, "max_mr_size", hex64(a.max_mr_size))
  field(1, "page_size_cap", string.format("0x%x", a.page_size_cap))
  for _, k in ipairs({ "max_qp", "max_qp_wr" }) do field(1, k, a[k]) end
  field(1, "device_cap_flags", string.format("0x%08x", a.device_cap_flags))
  print_flags(a.device_caps)
  for _, k in ipairs({ "max_sge", "max_sge_rd", "max_cq", "max_cqe", "max_mr", "max_pd", "max_qp_rd_atom",
                       "max_ee_rd_atom", "max_res_rd_atom", "max_qp_init_rd_atom", "max_ee_init_rd_atom" }) do
    field(1, k, a[k])
  end
  field(1, "atomic_cap", ATOMIC[a.atomic_cap] or a.atomic_cap)
  for _, k in ipairs({ "max_ee", "max_rdd", "max_mw", "max_raw_ipv6_qp", "max_raw_ethy_qp", "max_mcast_grp",
                       "max_mcast_qp_attach",
                       "max_total_mcast_qp_attach", "max_ah", "max_fmr", "max_srq", "max_srq_wr", "max_srq_sge",
                       "max_pkeys", "local_ca_ack_delay" }) do
    field(1, k, a[k])
  end
  local x = ctx:query_device_ex()
  if x then
    field(1, "device_cap_flags_ex", string.format("0x%X", x.device_cap_flags_ex))
    field(1, "max_wq_type_rq", x.max_wq_type_rq)
  end
end

local function port_verbose(ctx, port, p)
  field(3, "max_msg_sz", string.format("0x%x", p.max_msg_sz))
  field(3, "port_cap_flags", string.format("0x%08x", p.port_cap_flags))
  field(3, "port_cap_flags2", string.format("0x%04x", p.port_cap_flags2))
  field(3, "max_vl_num", p.max_vl_num)
  field(3, "bad_pkey_cntr", string.format("0x%x", p.bad_pkey_cntr))
  field(3, "qkey_viol_cntr", string.format("0x%x", p.qkey_viol_cntr))
  for _, k in ipairs({ "sm_sl", "pkey_tbl_len", "gid_tbl_len", "subnet_timeout", "init_type_reply" }) do
    field(3, k, p[k])
  end
  for _, g in ipairs(ctx:query_gid_table()) do
    if g.port_num == port then
      local label = string.format("GID[%3d]:", g.gid_index)
      print("\t\t\t" .. label .. "\t\t" .. g.gid .. ", " .. (GID_TYPES[g.gid_type] or g.gid_type))
    end
  end
end

local function print_port(o, ctx, port)
  local p, msg = ctx:query_port(port)
  if not p then
    io.stderr:write("Failed to query port ", port, ": ", msg, "\n")
    return false
  end
  print("\t\tport:\t" .. port)
  field(3, "state", string.format("PORT_%s (%d)", p.state:upper(), STATES[p.state] or 0))
  field(3, "max_mtu", mtu(p.max_mtu))
  field(3, "active_mtu", mtu(p.active_mtu))
  field(3, "sm_lid", p.sm_lid)
  field(3, "port_lid", p.lid)
  field(3, "port_lmc", string.format("0x%02x", p.lmc))
  field(3, "link_layer", LINK[p.link_layer] or "Unknown")
  if o.verbose then port_verbose(ctx, port, p) end
  print()
  return true
end

local function print_device(o, d)
  local ctx, msg = ibv.open(d.name)
  if not ctx then
    io.stderr:write("Failed to open device ", d.name, ": ", msg, "\n")
    return false
  end
  local a = assert(ctx:query_device())
  print("hca_id:\t" .. d.name)
  field(1, "transport", TRANSPORTS[d.transport] or "invalid transport")
  field(1, "fw_ver", a.fw_ver)
  field(1, "node_guid", a.node_guid)
  field(1, "sys_image_guid", a.sys_image_guid)
  field(1, "vendor_id", string.format("0x%04x", a.vendor_id))
  field(1, "vendor_part_id", a.vendor_part_id)
  field(1, "hw_ver", string.format("0x%X", a.hw_ver))
  field(1, "phys_port_cnt", a.phys_port_cnt)
  if o.verbose then device_verbose(ctx, a) end
  local ok = true
  if o.ib_port and o.ib_port > a.phys_port_cnt then
    io.stderr:write("Invalid port requested for device\n")
    ok = false
  end
  for port = 1, a.phys_port_cnt do
    if not o.ib_port or o.ib_port == port then ok = print_port(o, ctx, port) and ok end
  end
  ctx:close()
  return ok
end

-- The devices, or with -l their names alone: ends the process when there is
-- none (1) or after the list (0).
local function devices_or_list(o)
  local devices = assert(ibv.devices())
  if #devices == 0 then
    print("No IB devices found")
    os.exit(1)
  end
  if o.list then
    print(string.format("%d HCA%s found:", #devices, #devices > 1 and "s" or ""))
    for _, d in ipairs(devices) do print("\t" .. d.name) end
    os.exit(0)
  end
  return devices
end

--- The tool: `ibvlua devinfo ...`, `lua5.4 examples/devinfo.lua ...`; arg is the command line
-- (arg[1] the first option), as a script's.  Ends the process with the exit status.
function devinfo.main(arg)
  local o = options(arg)
  local devices = devices_or_list(o)
  local ok, found = true, false
  for _, d in ipairs(devices) do
    if not o.ib_dev or d.name == o.ib_dev then
      found = true
      ok = print_device(o, d) and ok
    end
  end
  if not found then
    io.stderr:write("IB device '", o.ib_dev, "' wasn't found\n")
    os.exit(1)
  end
  os.exit(ok and 0 or 1)
end

return devinfo
