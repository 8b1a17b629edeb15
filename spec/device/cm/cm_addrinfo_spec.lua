-- rdma_getaddrinfo results on rxe0: cm.getaddrinfo's ibverbs.cm_addrinfo, its
-- fields and list, a passive lookup, the nil, msg, errno of a name that does
-- not resolve, bad hints (raising, named), and close.
local cm = require "ibverbs.cm"
local support = require "support"

local ADDR = support.CM_ADDR

describe("on rxe0, cm.getaddrinfo", function()
  it("gives an ibverbs.cm_addrinfo: the first entry's fields, its length, every entry as a table", function()
    local ai = assert(cm.getaddrinfo(ADDR, "7471", { port_space = "tcp" }))
    assert.equal("ibverbs.cm_addrinfo", getmetatable(ai).__name)
    assert.equal(1, #ai)
    assert.same({ ADDR .. ":7471", "inet", "rc", "tcp" }, { ai.dst_addr, ai.family, ai.qp_type, ai.port_space })
    assert.is_table(ai.flags)
    local list = ai:list()
    assert.equal(#ai, #list)
    assert.same({ ADDR .. ":7471", "inet", "rc", "tcp" },
      { list[1].dst_addr, list[1].family, list[1].qp_type, list[1].port_space })
    assert.is_false(ai:is_closed())
    assert.is_true(ai:close())
  end)

  it("passive: the local address to listen on, which create_ep binds", function()
    local ai = assert(cm.getaddrinfo(ADDR, "7964", { flags = { "passive" }, port_space = "tcp" }))
    assert.equal(ADDR .. ":7964", ai.src_addr)
    assert.is_nil(ai.dst_addr)
    local id = assert(cm.create_ep(ai))
    assert.equal(ADDR .. ":7964", id:get_local_addr())
    assert.is_true(id:close())
    local udp = assert(cm.getaddrinfo(ADDR, "7965", { flags = { "passive" }, port_space = "udp" }))
    assert.same({ "udp", "ud" }, { udp.port_space, udp.qp_type })
  end)

  it("fails with nil, msg, errno for a name that does not resolve", function()
    local ai, msg, errno = cm.getaddrinfo("no.such.host.invalid", "1")
    assert.is_nil(ai)
    assert.matches("^rdma_getaddrinfo: ", msg)
    assert.equal(99, errno) -- EADDRNOTAVAIL
  end)

  it("raises on bad hints and arguments, naming them", function()
    assert.error_matches(function() cm.getaddrinfo(ADDR, "1", { bogus = 1 }) end,
      "getaddrinfo: hints: unknown field 'bogus'", 1, true)
    assert.error_matches(function() cm.getaddrinfo(ADDR, "1", { port_space = "nope" }) end,
      "getaddrinfo: field 'port_space': invalid value 'nope'", 1, true)
    assert.error_matches(function() cm.getaddrinfo(ADDR, "1", { flags = { "numeric_host" } }) end,
      "getaddrinfo: field 'flags': invalid value 'numeric_host'", 1, true)
    assert.error_matches(function() cm.getaddrinfo(nil, nil, { src_addr = 5 }) end,
      "field 'src_addr': address expected, got number", 1, true)
    assert.error_matches(function() cm.getaddrinfo({}, "1") end, "bad argument #1 to 'getaddrinfo'", 1, true)
  end)

  it("closes twice harmlessly; closed, its methods raise and create_ep refuses it", function()
    local ai = assert(cm.getaddrinfo(ADDR, "7471"))
    assert.is_true(ai:close())
    assert.is_true(ai:close())
    assert.is_true(ai:is_closed())
    assert.has_error(function() ai:list() end, "list: attempt to use a closed ibverbs.cm_addrinfo")
    assert.error_matches(function() cm.create_ep(ai) end, "attempt to use a closed ibverbs.cm_addrinfo", 1, true)
  end)
end)
