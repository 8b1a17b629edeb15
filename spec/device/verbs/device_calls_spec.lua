-- The small device and process calls on rxe0: device index, fork status,
-- command fd and completion vectors, P_Key index, the raw clock, L2 address
-- resolution, imports (which rxe lacks: the clean errors), the *_str helpers
-- and the rate conversions.
local ibv = require "ibverbs"
local support = require "support"

describe("on rxe0, the device and process calls", function()
  it("give the kernel's device index in the device list", function()
    for _, d in ipairs(assert(ibv.devices())) do
      assert.equal(0, d.device_index % 1)
      if d.name == support.DEVICE then assert.is_true(d.device_index >= 0) end
    end
  end)

  it("initialize fork support in a fresh process, and refuse it once memory is registered", function()
    local out, rc = support.run(support.LUA .. [[ -e 'local ibv = require "ibverbs"
      print(ibv.is_fork_initialized(), assert(ibv.fork_init()), ibv.is_fork_initialized())']])
    assert.equal(0, rc, out)
    local before, done, after = out:match("^(%a+)\t(%a+)\t(%a+)\n$")
    assert.equal("true", done, out)
    -- "unneeded": the kernel keeps registered memory safe across fork by itself
    assert.is_true(before == "disabled" and after == "enabled" or before == "unneeded" and after == before,
      out)
    local ctx = support.open()
    local pd = assert(ctx:alloc_pd())
    local mr = assert(pd:reg_mr(64))
    if ibv.is_fork_initialized() == "disabled" then
      local ok, msg, errno = ibv.fork_init()
      assert.is_nil(ok)
      assert.matches("^ibv_fork_init: ", msg)
      assert.equal(22, errno) -- EINVAL: too late
    end
    mr:close(); pd:close(); ctx:close()
  end)

  it("give the command fd, the completion vectors and the index of the default P_Key", function()
    local ctx = support.open()
    assert.is_true(ctx:cmd_fd() >= 0)
    assert.is_true(ctx:num_comp_vectors() >= 1)
    assert.equal(0, assert(ctx:get_pkey_index(1, 0xffff)))
    local none, msg, errno = ctx:get_pkey_index(1, 0x1234)
    assert.is_nil(none)
    assert.matches("^ibv_get_pkey_index: ", msg)
    assert.is_number(errno)
    assert.has_error(function() ctx:get_pkey_index(1, 0x10000) end)
    ctx:close()
  end)

  it("read the raw clock, or say the provider lacks it", function()
    local ctx = support.open()
    local v, msg, errno = ctx:query_rt_values_ex()
    if v then
      assert.is_table(v.raw_clock)
    else -- rxe (rdma-core 44) has no query_rt_values
      assert.matches("^ibv_query_rt_values_ex: ", msg)
      assert.equal(95, errno)
    end
    ctx:close()
  end)

  it("resolve the Ethernet address of a GID", function()
    local ctx = support.open()
    local gid = ctx:query_gid(1, support.GID_INDEX)
    local mac, vid = ctx:resolve_eth_l2_from_gid{port_num = 1,
      grh = {dgid = gid, sgid_index = support.GID_INDEX}}
    assert(mac, vid)
    assert.matches("^%x%x:%x%x:%x%x:%x%x:%x%x:%x%x$", mac)
    assert.is_number(vid)
    local none, _, errno = ctx:resolve_eth_l2_from_gid{port_num = 1, dlid = 1} -- no GRH
    assert.is_nil(none)
    assert.is_number(errno)
    ctx:close()
  end)

  it("refuse imports on rxe with EOPNOTSUPP, and keep the caller's fd open", function()
    local ctx = support.open()
    local pd = assert(ctx:alloc_pd())
    local mr = assert(pd:reg_mr(64))
    local ctx2, msg, errno = ibv.import_device(ctx:cmd_fd())
    assert.is_nil(ctx2)
    assert.matches("^ibv_import_device: ", msg)
    assert.equal(95, errno) -- rxe has no import_context
    assert.is_true(ctx:query_port(1).state == "active") -- its own fd still works
    local none
    none, msg, errno = ctx:import_pd(pd.handle)
    assert.is_nil(none)
    assert.matches("^ibv_import_pd: ", msg)
    assert.equal(95, errno)
    none, msg, errno = pd:import_mr(mr.handle)
    assert.is_nil(none)
    assert.matches("^ibv_import_mr: ", msg)
    assert.equal(95, errno)
    none, msg, errno = ctx:import_dm(1, 4096) -- rxe has no device memory to import
    assert.is_nil(none)
    assert.matches("^ibv_import_dm: ", msg)
    assert.equal(95, errno)
    assert.error_matches(function() ctx:import_dm(1) end, "bad argument #2 to 'import_dm'", 1, true)
    none, msg, errno = ibv.import_device(0) -- not an RDMA device's fd
    assert.is_nil(none)
    assert.matches("^ibv_import_device: ", msg)
    assert.is_true(errno == 22 or errno == 19) -- EINVAL (not a character device), ENODEV
    mr:close(); pd:close(); ctx:close()
  end)

  it("name the enum values of what rxe0 reports", function()
    local ctx = support.open()
    local port = ctx:query_port(1)
    assert.equal("active", ibv.port_state_str(port.state))
    assert.equal("active", ibv.port_state_str(4))
    assert.equal("InfiniBand channel adapter", ibv.node_type_str("ca"))
    assert.equal("success", ibv.wc_status_str("success"))
    assert.equal("Work Request Flushed Error", ibv.wc_status_str(5))
    assert.equal("unknown", ibv.wc_status_str(1000))
    assert.equal("port active", ibv.event_type_str("port_active"))
    assert.has_error(function() ibv.wc_status_str("no_such_status") end)
    ctx:close()
  end)

  it("convert rates to Mb/s and multiples of 2.5 Gb/s and back", function()
    assert.equal(2500, ibv.rate_to_mbps("2_5_gbps"))
    assert.equal(4, ibv.rate_to_mult("10_gbps"))
    assert.equal("10_gbps", ibv.mult_to_rate(4))
    assert.equal("2_5_gbps", ibv.mbps_to_rate(2500))
    assert.equal("max", ibv.mbps_to_rate(1)) -- no such rate
    assert.equal(-1, ibv.rate_to_mbps("max"))
    local tso = support.open()
    local a = assert(tso:query_device_ex())
    assert.is_boolean(ibv.is_qpt_supported(a.tso_supported_qpts, "ud"))
    assert.is_true(ibv.is_qpt_supported(16, "ud")) -- bit 4: IBV_QPT_UD
    assert.is_false(ibv.is_qpt_supported(0, "rc"))
    local sport = ibv.flow_label_to_udp_sport(0x12345)
    assert.is_true(sport >= 0xc000 and sport <= 0xffff)
    assert.has_error(function() ibv.flow_label_to_udp_sport(0x100000) end)
    tso:close()
  end)
end)
