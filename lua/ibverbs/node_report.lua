--- What this node has and lacks for lua-ibverbs and its tools, in one screen:
-- something to paste into a ticket.  `ibvlua --version` prints it.
--
--   require("ibverbs.node_report").print()        -- lua5.4 -e '...' works as well
--   local f = require("ibverbs.node_report").facts()  -- the same as data
--   for _, l in ipairs(require("ibverbs.node_report").lines()) do ... end
--
-- The facts: the module and the rdma-core headers it was built with; the node
-- (host name, distribution, kernel); the rdma-core release in use, from the
-- library's file name (rdma-core names it libibverbs.so.1.<ABI>.<release>:
-- exact unless someone renamed the file) and bounded by the newest symbol
-- versions its libibverbs and librdmacm export (IBVERBS_1.14 came with 36 and
-- is still the newest in 58: a range); the verbs newer than rdma-core 28 it
-- lacks and what reads sysfs instead (ibv.rdma_core); each device with its
-- user-space provider (ctx:provider), its kernel driver (sysfs
-- <ibdev_path>/device/uevent, or the netdev of a software device), node type,
-- GUID, firmware and ports; where the tools' Lua libraries come from
-- (argparse, dkjson, LuaSocket: built in, from a file, or missing); and, last,
-- what the node lacks.  Nothing runs a program; every file read is optional.
local report = {}

local ok_ibv, ibv = pcall(require, "ibverbs")

-- The Lua libraries the tools need, and who needs them.
report.DEPENDENCIES = {
  { name = "argparse", needed_by = "every tool's command line" },
  { name = "dkjson", needed_by = "fabric_check, fabric_matrix: --json, --expect files, the fabric wire" },
  { name = "socket", needed_by = "fabric_matrix, ibverbs.fabric, ibverbs.exchange" },
}

local WIDTH = 100

local function slurp(path)
  local f = io.open(path)
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

local function first_line(path)
  local s = slurp(path)
  return s and s:match("^([^\n]*)") or nil
end

-- Exists (a directory too: opening one for reading succeeds on Linux).
local function exists(path)
  local f = io.open(path)
  if f then f:close() end
  return f ~= nil
end

-- pieces (each with its own separator) after prefix, wrapped at WIDTH under an indent
local function wrap(out, prefix, pieces, indent)
  local line, has = prefix, false
  for _, piece in ipairs(pieces) do
    if has and #line + #piece > WIDTH then
      out[#out + 1] = (line:gsub("%s+$", ""))
      line = indent
    end
    line, has = line .. piece, true
  end
  out[#out + 1] = line
end

-- items joined by sep, as pieces for wrap
local function joined(items, sep)
  local p = {}
  for i, item in ipairs(items) do p[i] = item .. (i < #items and sep or "") end
  return p
end

local function node_facts()
  local os_name = (slurp("/etc/os-release") or ""):match('PRETTY_NAME="?([^"\n]*)')
  return { hostname = first_line("/proc/sys/kernel/hostname"), os = os_name,
           kernel = first_line("/proc/sys/kernel/osrelease") }
end

-- The rdma-core release from the library's file name ("libibverbs.so.1.14.44.0": "44.0").
function report.file_release(path)
  return path and path:match("libibverbs%.so%.1%.%d+%.(%d+%.%d+)$") or nil
end

-- The kernel's side of a device: its driver and PCI slot, or the netdev a software device sits on.
local function kernel_driver(ibdev_path)
  local uevent = slurp(ibdev_path .. "/device/uevent")
  local driver = uevent and uevent:match("DRIVER=([^\n]+)")
  if driver then
    local slot = uevent:match("PCI_SLOT_NAME=([^\n]+)")
    return driver .. (slot and (", PCI " .. slot) or "")
  end
  local parent = first_line(ibdev_path .. "/parent") or first_line(ibdev_path .. "/ports/1/gid_attrs/ndevs/0")
  if parent then return "no device: a software device on netdev " .. parent end
  return "no device link in " .. ibdev_path
end

local function port_facts(ctx, nports)
  local gids_ok, gids, gmsg = pcall(ctx.query_gid_table, ctx)
  local gid_error = not gids_ok and tostring(gids) or not gids and gmsg or nil
  if gid_error then gids = nil end
  local ports = {}
  for p = 1, nports do
    local a, msg = ctx:query_port(p)
    local port = { port = p, error = not a and msg or nil }
    if a then
      port.state, port.mtu, port.link_layer, port.lid = a.state, a.active_mtu, a.link_layer, a.lid
      if gids then
        port.gids = 0
        for _, g in ipairs(gids) do
          if g.port_num == p then
            port.gids = port.gids + 1
            if not port.roce_v2 and g.gid_type == "roce_v2" and g.gid:match("^::ffff:%d+%.%d+%.%d+%.%d+$") then
              port.roce_v2 = { index = g.gid_index, gid = g.gid }
            end
          end
        end
      else
        port.gid_error = gid_error
      end
    end
    ports[#ports + 1] = port
  end
  return ports
end

local function device_facts(d)
  local dev = { name = d.name, guid = d.guid, node_type = d.node_type, transport = d.transport,
                kernel = kernel_driver(d.ibdev_path) }
  local ctx, msg = ibv.open(d.name)
  if not ctx then
    dev.error = msg
    return dev
  end
  dev.provider, dev.provider_file = ctx:provider()
  local a = ctx:query_device()
  if a then
    dev.fw_ver, dev.vendor_id, dev.vendor_part_id = a.fw_ver, a.vendor_id, a.vendor_part_id
    dev.ports = port_facts(ctx, a.phys_port_cnt)
  end
  ctx:close()
  return dev
end

-- No device listed: why, from the kernel's side (ibv_get_device_list reads /sys/class/infiniband_verbs).
local function why_no_device(msg)
  local names = {}
  for i = 0, 63 do
    local n = first_line(("/sys/class/infiniband_verbs/uverbs%d/ibdev"):format(i))
    if n then names[#names + 1] = n end
  end
  local detail = msg and ("; " .. msg) or ""
  if #names > 0 then
    return "the kernel has " .. table.concat(names, ", ") .. ", but no user-space provider serves them: "
      .. "install ibverbs-providers (Debian, Ubuntu) or libibverbs (RHEL, SLES)"
  elseif exists("/sys/class/infiniband") and not exists("/sys/class/infiniband_verbs") then
    return "the kernel's RDMA core is loaded but not ib_uverbs (modprobe ib_uverbs" .. detail .. ")"
  elseif not exists("/sys/class/infiniband") then
    return "this kernel has no RDMA driver loaded (no /sys/class/infiniband" .. detail .. ")"
  end
  return "the kernel has no RDMA device" .. (msg and (" (" .. msg .. ")") or "")
end

local function dependency_facts()
  local out = {}
  for _, d in ipairs(report.DEPENDENCIES) do
    local f = { name = d.name, needed_by = d.needed_by }
    local builtin = package.preload[d.name] ~= nil
    local ok, m = pcall(require, d.name)
    if not ok then
      f.where, f.error = "missing", tostring(m):match("^[^\n]*")
    else
      f.where = builtin and "built in" or
        ("from " .. (package.searchpath(d.name, package.path) or package.searchpath(d.name, package.cpath) or "?"))
      local v = type(m) == "table" and (m._VERSION or m.version) or nil
      f.version = v and tostring(v):gsub("^" .. d.name .. "%s+", "") or nil
    end
    out[#out + 1] = f
  end
  return out
end

--- What the report says, as data.
-- @treturn table `lua`, `module` (`version`, `built_in`, `error` when ibverbs cannot be
-- loaded), `node` (`hostname`, `os`, `kernel`), `rdma_core` (`ibv.rdma_core`'s fields and
-- `release`: from the library's file name), `devices` (each `name`, `guid`, `node_type`,
-- `provider`, `provider_file`, `kernel`, `fw_ver`, `ports`: `state`, `mtu`, `link_layer`,
-- `lid`, `gids`, `roce_v2`), `no_devices` (why, when none is listed), `dependencies`
-- (`name`, `where`: "built in", "from <path>" or "missing", `version`, `needed_by`) and
-- `lacks` (what the tools need that is not here, as text; empty when nothing)
function report.facts()
  local f = { lua = rawget(_G, "jit") and jit.version or _VERSION, node = node_facts(), devices = {}, lacks = {} }
  f.dependencies = dependency_facts()
  for _, d in ipairs(f.dependencies) do
    if d.where == "missing" then f.lacks[#f.lacks + 1] = d.name .. " (" .. d.needed_by .. ")" end
  end
  if not ok_ibv then
    f.module = { error = tostring(ibv):match("^[^\n]*") }
    f.lacks[#f.lacks + 1] = "the ibverbs module (" .. f.module.error .. ")"
    return f
  end
  f.module = { version = ibv._VERSION, built_in = package.preload["ibverbs.core"] ~= nil }
  if not f.module.built_in then f.module.file = package.searchpath("ibverbs.core", package.cpath) end
  local rc = {}
  for k, v in pairs(ibv.rdma_core) do rc[k] = v end
  rc.release = report.file_release(rc.libibverbs)
  f.rdma_core = rc
  local list, msg = ibv.devices()
  local active = false
  for _, d in ipairs(list or {}) do
    local ok, dev = pcall(device_facts, d)
    if not ok then dev = { name = d.name, kernel = "?", error = tostring(dev) } end
    for _, p in ipairs(dev.ports or {}) do active = active or p.state == "active" end
    f.devices[#f.devices + 1] = dev
  end
  if #f.devices == 0 then
    f.no_devices = why_no_device(not list and msg or nil)
    f.lacks[#f.lacks + 1] = "an RDMA device: " .. f.no_devices
  elseif not active then
    f.lacks[#f.lacks + 1] = "an active port (no port of any device is active)"
  end
  return f
end

local function release_line(rc)
  local range = rc.at_most and (rc.at_least .. " to " .. rc.at_most) or (rc.at_least .. " or later")
  local versions = table.concat(rc.versions or {}, ", ")
  local file = rc.libibverbs and rc.libibverbs:match("[^/]+$") or "?"
  local s
  if rc.release then
    local r = tonumber(rc.release:match("^%d+"))
    s = ("rdma-core: %s (the file name %s; its symbol versions %s say %s%s)"):format(rc.release, file,
      versions, range, (r < rc.at_least or (rc.at_most and r > rc.at_most)) and ": they disagree" or "")
  else
    s = ("rdma-core: %s (from the symbol versions %s; the file name %s does not say)"):format(range, versions, file)
  end
  if rc.aid then s = s .. "; IBVL_RDMA_CORE=" .. rc.aid .. " (a test aid): treated as rdma-core " .. rc.aid end
  return s
end

local function missing_lines(out, rc)
  local by = {}
  for _, name in ipairs(rc.missing) do
    local r = rc.since and rc.since[name] or 0
    by[r] = by[r] or {}
    table.insert(by[r], name)
  end
  local releases = {}
  for r in pairs(by) do releases[#releases + 1] = r end
  table.sort(releases)
  local pieces = {}
  for k, r in ipairs(releases) do
    for i, name in ipairs(by[r]) do
      pieces[#pieces + 1] = (i == 1 and ("(%d) "):format(r) or "") .. name
        .. (i < #by[r] and ", " or k < #releases and "; " or "")
    end
  end
  local head = "verbs newer than rdma-core 28 this node lacks: "
  if #pieces == 0 then
    out[#out + 1] = head .. "none"
  else
    wrap(out, head .. #rc.missing .. ", by the release that brought them: ", pieces, "  ")
  end
  if #rc.fallbacks > 0 then
    out[#out + 1] = "  read from sysfs instead: " .. table.concat(rc.fallbacks, ", ")
  end
end

local function device_lines(out, d)
  local l = ("  %s: %s, node guid %s"):format(d.name, d.node_type or "?", d.guid or "?")
  if d.fw_ver and d.fw_ver ~= "" then l = l .. ", fw " .. d.fw_ver end
  if d.vendor_id and d.vendor_id ~= 0 then
    l = l .. (", vendor 0x%04x part %d"):format(d.vendor_id, d.vendor_part_id)
  end
  out[#out + 1] = l
  out[#out + 1] = ("    provider %s; kernel: %s"):format(
    d.provider and (d.provider .. " (" .. d.provider_file .. ")") or "?", d.kernel)
  if d.error then out[#out + 1] = "    cannot open: " .. d.error end
  for _, p in ipairs(d.ports or {}) do
    if p.error then
      out[#out + 1] = ("    port %d: %s"):format(p.port, p.error)
    else
      local s = ("    port %d: %s, mtu %s, %s"):format(p.port, p.state, tostring(p.mtu), p.link_layer)
      if p.link_layer ~= "ethernet" then s = s .. ", lid " .. tostring(p.lid) end
      if p.gids then
        s = s .. ", " .. p.gids .. " GIDs"
        if p.roce_v2 then s = s .. (", RoCE v2 IPv4 at index %d (%s)"):format(p.roce_v2.index, p.roce_v2.gid) end
      else
        s = s .. ", GIDs: " .. tostring(p.gid_error)
      end
      out[#out + 1] = s
    end
  end
end

--- The report as lines of text (one screen; long lists wrap at 100 columns).
-- @tparam[opt] table opts `host`: the first line (ibvlua passes its version line);
-- `lua`: the Lua line's text (default: `_VERSION`, or `jit.version` under LuaJIT)
-- @treturn {string,...} lines
-- @treturn table the facts they were made from (`report.facts`)
function report.lines(opts)
  opts = opts or {}
  local f = report.facts()
  local out = {}
  if opts.host then out[#out + 1] = opts.host end
  out[#out + 1] = "lua: " .. (opts.lua or f.lua)
  if f.module.error then
    out[#out + 1] = "module: cannot load ibverbs: " .. f.module.error
  else
    local rc = f.rdma_core
    out[#out + 1] = ("module: %s (%s), built against rdma-core %s"):format(f.module.version,
      f.module.built_in and "built in, with the Lua modules of lua-ibverbs" or (f.module.file or "?"), rc.built)
  end
  local n = f.node
  out[#out + 1] = ("node: %s, %s, kernel %s"):format(n.hostname or "?", n.os or "unknown system", n.kernel or "?")
  if f.rdma_core then
    out[#out + 1] = release_line(f.rdma_core)
    out[#out + 1] = "  " .. (f.rdma_core.libibverbs or "libibverbs: ?") .. ", "
      .. (f.rdma_core.librdmacm or "librdmacm: ?")
    missing_lines(out, f.rdma_core)
    out[#out + 1] = "devices: " .. (#f.devices > 0 and #f.devices or ("none: " .. f.no_devices))
    for _, d in ipairs(f.devices) do device_lines(out, d) end
  end
  local deps = {}
  for _, d in ipairs(f.dependencies) do
    deps[#deps + 1] = d.name .. " " .. (d.version and (tostring(d.version) .. " ") or "") .. d.where
  end
  wrap(out, "the tools' libraries: ", joined(deps, "; "), "  ")
  wrap(out, "lacks: ", joined(#f.lacks > 0 and f.lacks or { "nothing the tools need" }, "; "), "  ")
  return out, f
end

--- Prints the report to standard output.
-- @tparam[opt] table opts as `report.lines` takes them
-- @treturn boolean true when the node lacks nothing the tools need
function report.print(opts)
  local out, f = report.lines(opts)
  io.stdout:write(table.concat(out, "\n"), "\n")
  io.stdout:flush()
  return #f.lacks == 0
end

return report
