--- A rank's rails for fabric_matrix.lua: one per device and port asked for
-- (-d dev, dev,dev..., or all), each with its verbs resources or the local
-- fault that stops it ({name =, fault =}); and the GID choice fabric_check.lua
-- shares.
--
--   local rails = require "ibverbs.bringup.rails"
--   local list, ibv = rails.open(o, sizes)   -- sizes: ring_n, cqe; ibv nil on a dry run or without the module
--   local idx = rails.pick_gid(ctx, port, link_layer, o.gid_idx)
local rails = {}

local ACCESS = { "local_write", "remote_write" }
rails.ACCESS = ACCESS

--- The GID index for traffic on port: given (-g), else 0 off Ethernet, else
-- the port's first RoCE v2 IPv4 GID, else 0.
function rails.pick_gid(ctx, port, link_layer, given)
  if given then return given end
  if link_layer ~= "ethernet" then return 0 end
  for _, g in ipairs(ctx:query_gid_table() or {}) do
    if g.port_num == port and g.gid_type == "roce_v2" and g.gid:find("^::ffff:%d") then return g.gid_index end
  end
  return 0
end

-- The resources of an active port's rail (raises on a failed verbs call).
local function set_up(ibv, rail, attr, o, sizes)
  local ctx, port = rail.ctx, rail.port
  rail.gid_index = rails.pick_gid(ctx, port, attr.link_layer, o.gid_idx)
  rail.gid = assert(ctx:query_gid(port, rail.gid_index))
  rail.lid, rail.mtu = attr.lid, attr.active_mtu
  rail.pd = assert(ctx:alloc_pd())
  if o.wait == "event" then
    rail.channel = assert(ctx:create_comp_channel())
    rail.cq = assert(ctx:create_cq{ cqe = sizes.cqe, channel = rail.channel })
    local fd = rail.channel.fd
    rail.waiter = { getfd = function() return fd end }
  else
    rail.cq = assert(ctx:create_cq(sizes.cqe))
  end
  rail.wcs = ibv.wc_array(64)
  rail.out_lat = assert(rail.pd:reg_mr(2 * o.lat_size, ACCESS))
  rail.out_buf = assert(rail.pd:reg_mr(o.bw_size, ACCESS))
  rail.in_lat = assert(rail.pd:reg_mr(o.lat_size, ACCESS))
  rail.in_buf = assert(rail.pd:reg_mr(o.bw_size, ACCESS))
  rail.ring = assert(rail.pd:reg_mr(sizes.ring_n * o.bw_size, ACCESS))
end

-- One rail of device name, port: its resources or its fault.
local function port_rail(ibv, ctx, name, port, o, sizes)
  local rail = { name = name .. ":" .. port, ctx = ctx, port = port }
  local attr, perr = ctx:query_port(port)
  if not attr then
    rail.fault = string.format("%s port %d: %s", name, port, tostring(perr))
  elseif attr.state ~= "active" then
    rail.fault = string.format("%s port %d is %s", name, port, attr.state)
  else
    local ok, err = pcall(set_up, ibv, rail, attr, o, sizes)
    if not ok then rail.fault = string.format("%s port %d: cannot set up: %s", name, port, tostring(err)) end
  end
  return rail
end

-- The devices asked for (names), or nil and the rail that says why there are none.
local function wanted(o, devs)
  if not devs[1] and (not o.ib_dev or o.ib_dev == "all") then
    return nil, { name = o.ib_dev or "(any)", fault = "no RDMA device" }
  end
  local l = {}
  if not o.ib_dev then
    l[1] = devs[1].name
  elseif o.ib_dev == "all" then
    for _, d in ipairs(devs) do l[#l + 1] = d.name end
  else
    for name in o.ib_dev:gmatch("[^,]+") do l[#l + 1] = name end
  end
  return l
end

-- The rails of device name: one per port (every port with -d all), or one with its fault.
local function device_rails(ibv, name, devs, o, sizes, out)
  local list, present = {}, false
  for _, d in ipairs(devs) do list[#list + 1] = d.name; present = present or d.name == name end
  if not present then
    out[#out + 1] = { name = name .. ":" .. o.ib_port, fault = string.format("no RDMA device %s (this host has: %s)",
      name, #list > 0 and table.concat(list, ", ") or "none") }
    return
  end
  local ctx, cerr = ibv.open(name)
  if not ctx then
    out[#out + 1] = { name = name .. ":" .. o.ib_port, fault = "cannot open " .. name .. ": " .. tostring(cerr) }
    return
  end
  local ports = { o.ib_port }
  if o.ib_dev == "all" then
    ports = {}
    local a = ctx:query_device()
    for p = 1, a and a.phys_port_cnt or 1 do ports[#ports + 1] = p end
  end
  for _, port in ipairs(ports) do out[#out + 1] = port_rail(ibv, ctx, name, port, o, sizes) end
end

--- This rank's rails (each with index, its place in the list), and the
-- ibverbs module when it loaded.  A dry run opens nothing.
function rails.open(o, sizes)
  local out = {}
  if o.dry_run then
    for name in (o.ib_dev or "dry"):gmatch("[^,]+") do out[#out + 1] = { name = name, dry = true } end
  else
    local ok, ibv = pcall(require, "ibverbs")
    if not ok then
      return { { name = o.ib_dev or "?", fault = "cannot load ibverbs: " .. tostring(ibv), index = 1 } }
    end
    local devs, err, errno = ibv.devices()
    if not devs then
      local cause = (errno == 38) and "no RDMA driver loaded (" .. tostring(err) .. ")" or tostring(err)
      return { { name = o.ib_dev or "(any)", fault = cause, index = 1 } }, ibv
    end
    local names, none = wanted(o, devs)
    if not names then none.index = 1; return { none }, ibv end
    for _, name in ipairs(names) do device_rails(ibv, name, devs, o, sizes, out) end
    for i, r in ipairs(out) do r.index = i end
    return out, ibv
  end
  for i, r in ipairs(out) do r.index = i end
  return out
end

return rails
