-- lua/ibverbs/bringup/expect.lua (--expect FILE): the file read and checked (JSON or
-- Lua; a wrong one named by file and line or key), a host's entries from the
-- host lists, a port judged against its entry; and fabric_check.lua refusing
-- a bad file with exit 2 before it opens a device.
local expect = require "ibverbs.bringup.expect"
local fs = require "fabric_support"

local function file(name, body)
  local path = os.tmpname() .. name
  local fh = assert(io.open(path, "w"))
  fh:write(body)
  fh:close()
  return path
end

local ISSUE = '{"hosts": {"node[1-4]": {"ports": [{"device": "rxe0", "port": 1, "active_mtu": 1024}]}}}'

describe("expect.load", function()
  it("takes the issue's form as written, and the same as a Lua file returning a table", function()
    local t = assert(expect.load(file(".json", ISSUE)))
    assert.same({ { device = "rxe0", port = 1, active_mtu = 1024 } }, t.hosts["node[1-4]"].ports)
    local l = assert(expect.load(file(".lua", 'return { hosts = { ["node[1-4]"] = { ports = { '
      .. '{ device = "rxe0", port = 1, active_mtu = 1024 } } } } }')))
    assert.same(t, l)
  end)

  it("names the file and the line of malformed JSON or Lua", function()
    local p = file(".json", '{"hosts": {"n1":\n {"ports": [{"device": "rxe0",\n "port": [1}]}}}')
    local t, err = expect.load(p)
    assert.is_nil(t)
    assert.matches("^" .. p:gsub("%p", "%%%0") .. ": line 3: ", err)
    p = file(".json", ISSUE .. "\n}")
    assert.equal(p .. ": line 2: more after the JSON value", select(2, expect.load(p)))
    p = file(".lua", "return { hosts =\n")
    assert.matches("^" .. p:gsub("%p", "%%%0") .. ":2: ", select(2, expect.load(p)))
    assert.matches("^/nonexistent/x%.json: No such file or directory", select(2, expect.load("/nonexistent/x.json")))
  end)

  it("names the key of an unknown or mistyped entry, a bad host list, a missing device or port", function()
    local function err_of(body) return select(2, expect.load(file(".json", body))):match("^[^:]+: (.*)$") end
    assert.equal('hosts["node[1-4]"].ports[1].mtu: unknown key (known: active_mtu, counters, device, fw_ver, gid_type, '
      .. 'link_layer, port, rate)', err_of(ISSUE:gsub("active_mtu", "mtu")))
    assert.equal('hosts["node[1-4]"].ports[1].active_mtu: 256, 512, 1024, 2048 or 4096 expected, got 1000',
      err_of(ISSUE:gsub("1024", "1000")))
    assert.equal('hosts["node[1-4]"].ports[1].active_mtu: an integer expected, got "1024"',
      err_of(ISSUE:gsub("1024", '"1024"')))
    assert.equal("hosts[\"node[1-4\"]: unmatched '[' in the host list 'node[1-4'", err_of(ISSUE:gsub("4%]", "4")))
    assert.equal('hosts["node[1-4]"].ports[1]: \'port\' missing (a port entry names its device and port)',
      err_of(ISSUE:gsub('"port": 1, ', "")))
    assert.equal("'host': unknown key at the top (known: hosts, pairs)", err_of(ISSUE:gsub('"hosts"', '"host"')))
    assert.equal("pairs.max_lat: unknown key (known: max_lat_p99_us, max_lat_us, min_send_mbs, min_write_mbs)",
      err_of('{"pairs": {"max_lat": 3}}'))
    assert.equal("pairs.min_write_mbs: a number above 0 expected, got -5", err_of('{"pairs": {"min_write_mbs": -5}}'))
    assert.equal("pairs.max_lat_us: a number above 0 expected, got 3", err_of('{"pairs": {"max_lat_us": "3"}}'))
    assert.equal('hosts["*"].ports[1].counters: counter \'link_downed\': a count of 0 or more expected',
      err_of('{"hosts": {"*": {"ports": [{"device": "mlx5_0", "port": 1, "counters": {"link_downed": -1}}]}}}'))
  end)

  it("refuses ports that are not a non-empty list: an object, an empty list, no ports, a list with holes", function()
    local want = 'hosts["node[1-4]"].ports: a non-empty list of port entries expected'
    for _, body in ipairs({ '{"hosts": {"node[1-4]": {"ports": {"a": {"device": "rxe0", "port": 1}}}}}',
      '{"hosts": {"node[1-4]": {"ports": []}}}', '{"hosts": {"node[1-4]": {"ports": {}}}}',
      '{"hosts": {"node[1-4]": {}}}' }) do
      local p = file(".json", body)
      assert.equal(p .. ": " .. want, select(2, expect.load(p)), body)
    end
    local p = file(".lua", 'return { hosts = { ["node[1-4]"] = { ports = { [1] = { device = "rxe0", port = 1 }, '
      .. '[3] = { device = "rxe1", port = 1 } } } } }')
    assert.equal(p .. ": " .. want, select(2, expect.load(p)))
    p = file(".lua", 'return { hosts = { ["node[1-4]"] = { ports = { { device = "rxe0", port = 1 }, x = 1 } } } }')
    assert.equal(p .. ": " .. want, select(2, expect.load(p)))
  end)

  it("refuses a Lua file that returns no table, naming what it returned", function()
    local p = file(".lua", "x = 1\n")
    assert.equal(p .. ": a Lua expect file must return a table, got nil", select(2, expect.load(p)))
    p = file(".lua", "return 42\n")
    assert.equal(p .. ": a Lua expect file must return a table, got number", select(2, expect.load(p)))
  end)

  it("refuses a counter name no source knows, naming its key path and the nearest known names", function()
    local p = file(".json", '{"hosts": {"*": {"ports": [{"device": "rxe0", "port": 1, "counters": '
      .. '{"symbol_error": 0, "symbol_errors": 0}}]}}}')
    assert.equal(p .. ': hosts["*"].ports[1].counters: unknown counter \'symbol_errors\' (nearest: symbol_error, '
      .. "port_rcv_errors, req_cqe_error)", select(2, expect.load(p)))
    assert.truthy(expect.load(file(".json", '{"hosts": {"*": {"ports": [{"device": "rxe0", "port": 1, "counters": '
      .. '{"symbol_error": 0, "hw_link_downed": 0, "retry_exceeded_err": 0}}]}}}')))
  end)
end)

describe("expect.pair_limits", function()
  it("gives fabric_matrix.lua the pairs' absolute limits, each with its figure and direction; a file of pairs "
    .. "alone names no port", function()
    local spec = assert(expect.load(file(".json", '{"pairs": {"max_lat_p99_us": 4, "min_send_mbs": 9000}}')))
    assert.same({ { key = "lat_p99_us", max = true, name = "latency p99", value = 4 },
                  { key = "send_mbs", max = false, name = "send bandwidth", value = 9000 } }, expect.pair_limits(spec))
    assert.same({ nil, "host node1 is in no host list (the file has pairs only)" }, { expect.for_host(spec, "node1") })
    assert.is_nil(expect.pair_limits({ hosts = {} }))
  end)
end)

describe("expect.for_host and expect.compare", function()
  local spec = {
    hosts = {
      ["*"] = { ports = { { device = "mlx5_0", port = 1, link_layer = "InfiniBand", rate = 200 } } },
      ["node[01-16,20]"] = { ports = { { device = "mlx5_0", port = 1, rate = 400, active_mtu = 4096 } } },
    },
  }

  it("gives a host the entries of every section naming it, a host list's over *'s", function()
    assert.same({ { device = "mlx5_0", port = 1, link_layer = "InfiniBand", rate = 400, active_mtu = 4096 } },
      expect.for_host(spec, "node20"))
    assert.same({ { device = "mlx5_0", port = 1, link_layer = "InfiniBand", rate = 200 } },
      expect.for_host(spec, "node17"))
  end)

  it("names a host no host list names, with the lists; * names every host", function()
    local named = { hosts = { ["node[1-4]"] = spec.hosts["node[01-16,20]"], ["gpu[01-16]"] = spec.hosts["*"] } }
    assert.same({ nil, "host node9.cluster.local is in no host list (gpu[01-16], node[1-4])" },
      { expect.for_host(named, "node9.cluster.local") })
    assert.same({ nil, "host n1 is in no host list (the file has none)" }, { expect.for_host({ hosts = {} }, "n1") })
    assert.equal(1, #expect.for_host(spec, "anything.example.org")) -- *
  end)

  it("matches a host in full or in short form on either side, case ignored; an IP address only in full", function()
    local one = { ports = { { device = "rxe0", port = 1 } } }
    assert.equal(1, #expect.for_host({ hosts = { ["node[1-4]"] = one } }, "node1.cluster.local"))
    assert.equal(1, #expect.for_host({ hosts = { ["node1.cluster.local"] = one } }, "node1"))
    assert.equal(1, #expect.for_host({ hosts = { ["node1.a.example"] = one } }, "NODE1.b.example"))
    assert.is_nil(expect.for_host({ hosts = { ["node1.cluster.local"] = one } }, "node10"))
    assert.is_nil(expect.for_host({ hosts = { ["node1"] = one } }, "node10.cluster.local"))
    assert.is_nil(expect.for_host({ hosts = { ["10.0.0.1"] = one } }, "10.0.0.2"))
    assert.equal(1, #expect.for_host({ hosts = { ["10.0.0.1"] = one } }, "10.0.0.1"))
  end)

  it("takes a host list with blanks after its commas", function()
    local t = assert(expect.load(file(".json", '{"hosts": {"node[1-4], node7": {"ports": [{"device": "rxe0", '
      .. '"port": 1}]}}}')))
    assert.equal(1, #expect.for_host(t, "node7"))
    assert.equal(1, #expect.for_host(t, "node2"))
    assert.is_nil(expect.for_host(t, "node5"))
  end)

  it("names each value that differs with what was expected and found; link layers in any case", function()
    local e = expect.for_host(spec, "node03")[1]
    assert.same({}, expect.compare(e, { state = "active", link_layer = "infiniband", rate = 400, active_mtu = 4096 }))
    assert.same({ "state: expected active, found down", "active_mtu: expected 4096, found 1024",
      "rate: expected 400, found 200" },
      expect.compare(e, { state = "down", link_layer = "infiniband", rate = 200, active_mtu = 1024 }))
  end)

  it("reads the rate the kernel computes from sysfs", function()
    local root = os.tmpname()
    os.remove(root)
    assert(os.execute("mkdir -p " .. root .. "/mlx5_0/ports/1"))
    local fh = assert(io.open(root .. "/mlx5_0/ports/1/rate", "w"))
    fh:write("100 Gb/sec (4X EDR)\n")
    fh:close()
    assert.equal(100, expect.rate("mlx5_0", 1, root))
    assert.is_nil(expect.rate("mlx5_0", 2, root))
  end)

  it("judges results: a port that is not there fails, naming the file", function()
    local results = { { name = "rxe0", fw_ver = "", ports = { { port = 1, state = "active", link_layer = "ethernet",
      active_mtu = 1024, gid_index = 1, gids = { { index = 1, type = "roce_v2" } }, checks = {} } } } }
    expect.judge(results, { { device = "rxe0", port = 1, active_mtu = 1024, gid_type = "roce_v2" },
      { device = "rxe1", port = 1 } }, "g.json")
    assert.same({ name = "expect", pass = true, ms = 0 }, results[1].ports[1].checks[1])
    assert.same({ name = "expect", pass = false, ms = 0, detail = "rxe1 port 1 (g.json): not present on this host" },
      results[2].ports[1].checks[1])
  end)

  it("judges with read: a counter an entry names that the port lacks fails it, naming counter and port", function()
    local function results()
      return { { name = "rxe0", ports = { { port = 1, state = "active", checks = {} } } } }
    end
    local entries = { { device = "rxe0", port = 1, counters = { symbol_error = 0, link_downed = 0, sent_pkts = 5 } } }
    local asked = {}
    local r = results()
    expect.judge(r, entries, "g.json", function(dev, port)
      asked[#asked + 1] = dev .. ":" .. port
      return { hw_link_downed = 0, link_downed = 1, sent_pkts = 3 }
    end)
    assert.same({ "rxe0:1" }, asked)
    assert.same({ name = "expect", pass = false, ms = 0,
      detail = "rxe0 port 1 (g.json): counters: symbol_error not on this port" }, r[1].ports[1].checks[1])
    r = results() -- no counters at all: every one it names is lacking
    expect.judge(r, entries, "g.json", function() return nil, "no counters" end)
    assert.equal("rxe0 port 1 (g.json): counters: link_downed, sent_pkts, symbol_error not on this port",
      r[1].ports[1].checks[1].detail)
    r = results() -- rxe's link_downed read as hw_link_downed beside counters/' one
    expect.judge(r, { { device = "rxe0", port = 1, counters = { link_downed = 0 } } }, "g.json",
      function() return { hw_link_downed = 0 } end)
    assert.is_true(r[1].ports[1].checks[1].pass)
    r = results() -- without read, the counters are not looked at
    expect.judge(r, entries, "g.json")
    assert.is_true(r[1].ports[1].checks[1].pass)
  end)

  it("surveys the named ports (fabric_matrix.lua): found values as judge reads them, each device closed", function()
    local closed = 0
    local ctx = {
      query_device = function() return { fw_ver = "1.2" } end,
      query_port = function(_, port) return port == 1 and { state = "active", link_layer = "Ethernet",
        active_mtu = 512 } or nil end,
      query_gid_table = function() return { { port_num = 1, gid_index = 0, gid_type = "roce_v1" },
        { port_num = 1, gid_index = 1, gid_type = "roce_v2" } } end,
      close = function() closed = closed + 1 end,
    }
    local ibv = { open = function(name) if name == "rxe0" then return ctx end return nil, "no device " .. name end }
    local entries = { { device = "rxe0", port = 1, active_mtu = 1024, gid_type = "roce_v2" },
      { device = "rxe0", port = 2 }, { device = "mlx5_0", port = 1 } }
    local found = expect.survey(ibv, entries, function(_, port, link_layer)
      assert.equal(1, port)
      assert.equal("Ethernet", link_layer)
      return 1
    end)
    assert.equal(1, closed)
    assert.equal(1, #found)
    assert.equal("1.2", found[1].fw_ver)
    assert.is_nil(found[1].ctx)
    expect.judge(found, entries, "g.json")
    assert.same({ "rxe0 port 1 (g.json): active_mtu: expected 1024, found 512",
      "rxe0 port 2 (g.json): not present on this host", "mlx5_0 port 1 (g.json): not present on this host" },
      { found[1].ports[1].checks[1].detail, found[1].ports[2].checks[1].detail, found[2].ports[1].checks[1].detail })
  end)
end)

describe("fabric_check.lua --expect", function()
  it("exits 2 with one line naming the file and key, before it opens a device", function()
    local p = file(".json", ISSUE:gsub("active_mtu", "mtu"))
    local h = io.popen("LUA_PATH='lua/?.lua;;' LUA_CPATH='" .. fs.CPATH .. "' " .. fs.LUA
      .. " examples/fabric_check.lua --expect " .. p .. " 2>&1; echo rc=$?")
    local out = h:read("a")
    h:close()
    assert.equal("fabric_check.lua: --expect " .. p .. ': hosts["node[1-4]"].ports[1].mtu: unknown key (known: '
      .. "active_mtu, counters, device, fw_ver, gid_type, link_layer, port, rate)\nrc=2\n", out)
  end)

  it("fabric_matrix.lua: a port of this host that differs is a node verdict naming it, on each rank", function()
    local p = file(".json", '{"hosts": {"*": {"ports": [{"device": "rxe0", "port": 1, "active_mtu": 1024}]}}}')
    local out, rc = fs.matrix_ranks(2, "-d rxe0 -t 2 --expect " .. p)
    assert.same({ [0] = 1, 1 }, rc)
    for r = 0, 1 do
      assert.matches("VERDICT node: rank " .. r .. " %([^)]+%) rxe0:1: expect: rxe0 port 1 %(" .. p:gsub("%p", "%%%0")
        .. "%): not present on this host", out)
    end
  end)

  it("fabric_matrix.lua: a rank whose host no host list names stops every rank with exit 2 at the "
    .. "rendezvous", function()
    local p = file(".json", '{"hosts": {"node[1-2]": {"ports": [{"device": "rxe0", "port": 1}]}}, '
      .. '"pairs": {"max_lat_us": 5}}')
    local started = os.time()
    local _, rc, texts = fs.job("examples/fabric_matrix.lua", 3, "--dry-run --expect " .. p,
      function(r) return "SLURMD_NODENAME=" .. (r == 2 and "node9" or "node" .. (r + 1)) .. " " end)
    assert.same({ [0] = 2, 2, 2 }, rc)
    assert.is_true(os.time() - started < 20) -- not the rendezvous' time limit (--timeout + 15 s)
    local line = "fabric_matrix.lua: --expect " .. p .. ": host node9 is in no host list (node[1-2])\n"
    assert.equal(line, texts[2]:sub(1, #line))
    for r = 0, 2 do
      assert.matches("the ranks do not run the same script version and options: rank 0 %(node1%) and rank 1 "
        .. "%(node2%): '[^']-'; rank 2 %(node9%): '[^']- host_named=false'", texts[r])
    end
    -- every rank's host unnamed: they agree, and stop all the same
    _, rc, texts = fs.job("examples/fabric_matrix.lua", 2, "--dry-run --expect " .. p, "SLURMD_NODENAME=node7 ")
    assert.same({ [0] = 2, 2 }, rc)
    for r = 0, 1 do
      assert.equal("fabric_matrix.lua: --expect " .. p .. ": host node7 is in no host list (node[1-2])\n", texts[r])
    end
    -- a file of pairs alone names no host and needs none
    local pairs_only = file(".json", '{"pairs": {"max_lat_us": 5}}')
    _, rc = fs.job("examples/fabric_matrix.lua", 2, "--dry-run --expect " .. pairs_only, "SLURMD_NODENAME=node7 ")
    assert.same({ [0] = 0, 0 }, rc)
  end)

  it("fabric_matrix.lua reads and checks the file too: exit 2 before the rendezvous", function()
    local p = file(".json", ISSUE:gsub("1024", "1000"))
    local h = io.popen("LUA_PATH='lua/?.lua;;' LUA_CPATH='" .. fs.CPATH .. "' IBV_FABRIC_RANK=1 IBV_FABRIC_SIZE=2 "
      .. "IBV_FABRIC_ROOT=127.0.0.1:1 " .. fs.LUA .. " examples/fabric_matrix.lua --expect " .. p
      .. " 2>&1; echo rc=$?")
    local out = h:read("a")
    h:close()
    assert.equal("fabric_matrix.lua: --expect " .. p .. ': hosts["node[1-4]"].ports[1].active_mtu: 256, 512, 1024, '
      .. "2048 or 4096 expected, got 1000\nrc=2\n", out)
  end)
end)
