-- Multicast data end to end on rxe0, with the receiver checking the bytes:
-- through rdma_cm (join_multicast on UD ids) and through verbs
-- (qp:attach_mcast on a UD QP).
--
-- How soft-RoCE delivers a multicast datagram: rxe sends RoCE v2, a UDP packet
-- to the group's IP address.  The kernel's IP layer loops a copy of every
-- multicast packet back to the sending host (ip_mc_output), whatever the
-- netdev (rxe0's is a dummy), but its receive path keeps the copy only when
-- the netdev is a member of that IP group; rxe then hands it to the QPs
-- attached to the group's GID.  rdma_join_multicast makes the netdev a member
-- (the kernel's cma sends the IGMP join); ibv_attach_mcast only adds the
-- group's MAC address to the netdev, so on rxe a verbs-only attach receives
-- nothing until something joins the IP group on that netdev: here a UDP
-- socket (IP_ADD_MEMBERSHIP), as any host program could.
local ibv = require "ibverbs"
local cm = require "ibverbs.cm"
local socket = require "socket"
local support = require "support"

local ADDR = "192.0.2.1"
local GRH = 40
local CAP = {max_send_wr = 8, max_recv_wr = 8, max_send_sge = 1, max_recv_sge = 1}

-- A UD id bound to rxe0's address, with its QP, on channel ch.
local function ud_id(ch)
  local id = assert(ch:create_id{ps = "udp"})
  assert(id:bind_addr(ADDR .. ":0"))
  assert(id:create_qp{cap = CAP})
  return id
end

describe("on rxe0, rdma_cm multicast", function()
  it("delivers a datagram sent to the group to the member that joined it", function()
    local ch = assert(cm.event_channel())
    local recv, send = ud_id(ch), ud_id(ch)
    assert.is_true(recv:join_multicast("239.1.2.20"))
    local joined = assert(cm.expect(ch, "multicast_join", 5))
    assert.equal(recv, joined.id)
    assert.is_true(send:join_multicast("239.1.2.20", "sendonly_fullmember"))
    local ev = assert(cm.expect(ch, "multicast_join", 5))
    assert.equal(send, ev.id)
    local rmr = assert(recv:reg_msgs(GRH + 64))
    assert.is_true(recv:post_recv(1, rmr))
    local ah = assert(send.pd:create_ah(ev.ud.ah_attr))
    local smr = assert(send:reg_msgs(64))
    smr:write(0, "to the group")
    assert.is_true(send:post_ud_send(2, smr, 0, 12, nil, ah, ev.ud.qp_num))
    assert.equal("success", assert(send:get_send_comp(5)).status)
    local wc = assert(recv:get_recv_comp(5))
    assert.equal("success", wc.status)
    assert.equal(1, wc.wr_id)
    assert.equal(GRH + 12, wc.byte_len)
    assert.equal(send.qp.qp_num, wc.src_qp)
    assert.equal("to the group", rmr:read(GRH, 12))
    assert.is_true(recv:leave_multicast("239.1.2.20"))
    assert.is_true(send:leave_multicast("239.1.2.20"))
    ah:close(); rmr:close(); smr:close()
    assert.is_true(recv:close()); assert.is_true(send:close()); assert.is_true(ch:close())
  end)
end)

describe("on rxe0, verbs multicast (attach_mcast on a UD QP)", function()
  local MGID = "::ffff:239.1.2.21" -- RoCE v2: the IPv4-mapped group address

  -- a UD pair, the receiver's buffer with a receive posted, the sender's AH for the group
  local function setup()
    local env = support.pair{qp_type = "ud"}
    env.rmr = assert(env.pd:reg_mr(GRH + 64))
    env.smr = assert(env.pd:reg_mr(64))
    env.ah = assert(env.pd:create_ah{port_num = 1, grh = {dgid = MGID, sgid_index = support.GID_INDEX}})
    assert(env.b:post_recv{wr_id = 1, sge = {mr = env.rmr}})
    return env
  end

  local function send(env, text)
    env.smr:write(0, text)
    assert(env.a:post_send{wr_id = 2, send_flags = {"signaled"}, sge = {mr = env.smr, length = #text},
      ah = env.ah, remote_qpn = 0xffffff, remote_qkey = 0x11111111})
  end

  it("delivers a datagram to the attached QP once the netdev is in the IP group", function()
    local env = setup()
    assert.is_true(env.b:attach_mcast(MGID, 0))
    local member = assert(socket.udp4())
    assert(member:setoption("ip-add-membership", {multiaddr = "239.1.2.21", interface = ADDR}))
    send(env, "verbs multicast")
    local wcs = {}
    for _, wc in ipairs(support.completions(env.cq, 2, 5)) do wcs[wc.opcode] = wc end
    assert.equal("success", wcs.send.status)
    assert.equal("success", wcs.recv.status)
    assert.equal(GRH + 15, wcs.recv.byte_len)
    assert.equal(env.a.qp_num, wcs.recv.src_qp)
    assert.equal("verbs multicast", env.rmr:read(GRH, 15))
    assert.is_true(env.b:detach_mcast(MGID, 0))
    member:close()
  end)

  it("receives nothing on rxe with the QP attached but the netdev outside the IP group", function()
    local env = setup()
    assert.is_true(env.b:attach_mcast(MGID, 0))
    send(env, "lost")
    local wcs = ibv.wc_array(4)
    assert.equal(1, assert(env.cq:wait(wcs, 1, 5)))
    assert.equal("send", wcs:opcode(1))
    assert.equal(0, assert(env.cq:wait(wcs, 1, 0.5))) -- no receive completion
    assert.is_true(env.b:detach_mcast(MGID, 0))
  end)

  it("returns the provider's error for a second detach and for a unicast GID", function()
    local env = setup()
    assert.is_true(env.b:attach_mcast(MGID))
    assert.is_true(env.b:detach_mcast(MGID))
    local ok, msg, errno = env.b:detach_mcast(MGID)
    assert.is_nil(ok)
    assert.matches("^ibv_detach_mcast: ", msg)
    assert.is_number(errno)
    ok, msg, errno = env.b:attach_mcast(env.gid)
    assert.is_nil(ok)
    assert.matches("^ibv_attach_mcast: ", msg)
    assert.equal(22, errno) -- EINVAL: not a multicast GID
    assert.has_error(function() env.b:attach_mcast("not a gid") end)
  end)
end)
