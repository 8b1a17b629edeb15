-- lua/ibverbs/bringup/matrix/pair_traffic.lua (and the texts of lua/ibverbs/bringup/matrix/measures.lua):
-- the sizes the options give, the bytes a pair checks, an end's address as
-- its peer reads it, every phase named by one text.
local traffic = require "ibverbs.bringup.matrix.pair_traffic"
local measures = require "ibverbs.bringup.matrix.measures"

describe("lua/ibverbs/bringup/matrix/pair_traffic.lua", function()
  it("rounds the bandwidth messages up to whole chains and sizes the ring and the CQ from them", function()
    local s = traffic.sizes({ bw_iters = 1000 })
    assert.equal(1000, s.bw_iters)
    assert.equal(traffic.RING, s.ring_n)
    s = traffic.sizes({ bw_iters = 3 })
    assert.equal(traffic.CHAIN, s.bw_iters)
    assert.equal(traffic.CHAIN, s.ring_n)
    assert.equal(8 * traffic.RING + 8 * traffic.WINDOW * traffic.CHAIN + 64, s.cqe)
  end)

  it("gives each direction of a pair bytes of its own, of any length", function()
    local a = traffic.pattern_bytes(1, 2, 600)
    assert.equal(600, #a)
    assert.are_not.equal(a, traffic.pattern_bytes(2, 1, 600))
    assert.equal(a:sub(1, 10), traffic.pattern_bytes(1, 2, 10))
  end)

  it("writes an end's address as its peer reads it (a dry rail's stands in)", function()
    local rail = { lid = 7, mtu = 4096, gid = "::ffff:10.0.0.1", in_buf = { addr = 0x7fffabcd1234, rkey = 99 } }
    local e = { kind = "in", qp = { qp_num = 17 }, psn = 5 }
    assert.same({ qpn = 17, psn = 5, lid = 7, mtu = 4096, gid = "::ffff:10.0.0.1", addr = 0x7fffabcd1234, rkey = 99 },
      traffic.parse_info(traffic.info(rail, e)))
    assert.same({ qpn = 1, psn = 0, lid = 0, mtu = 1024, gid = "::", addr = 0, rkey = 0 },
      traffic.parse_info(traffic.info({ dry = true })))
    assert.is_nil(traffic.parse_info("1 2 3"))
  end)

  it("orders the ping-pongs the same way on every rank, so that no round of the shift pattern waits in a cycle",
    function()
      -- shift by 1 over 3 ranks: 0 -> 1 -> 2 -> 0, every rank one out end and one in end
      local n, order = 3, {}
      for me = 0, n - 1 do
        local rail = { index = 1 }
        local l = { { kind = "out", peer = (me + 1) % n, me = me, rail = rail },
                    { kind = "in", peer = (me - 1) % n, me = me, rail = rail } }
        table.sort(l, traffic.before)
        order[me] = l
      end
      -- play the ranks: a link runs when it is next at both its ends
      local pos, done = { [0] = 1, 1, 1 }, 0
      local function link(me, e) return e.kind == "out" and me .. ">" .. e.peer or e.peer .. ">" .. me end
      for _ = 1, 2 * n do
        for me = 0, n - 1 do
          local e = order[me][pos[me]]
          if e then
            local other = e.peer
            local f = order[other][pos[other]]
            if f and link(other, f) == link(me, e) then
              pos[me], pos[other], done = pos[me] + 1, pos[other] + 1, done + 1
            end
          end
        end
      end
      assert.equal(n, done) -- every link ran: no cycle of waiting ranks
      -- the other rails after the first; the sender breaks a tie
      local a = { kind = "out", peer = 1, me = 0, rail = { index = 2 } }
      local b = { kind = "in", peer = 1, me = 0, rail = { index = 1 } }
      assert.is_true(traffic.before(b, a))
      local out01 = { kind = "out", peer = 1, me = 0, rail = { index = 1 } }
      local in10 = { kind = "in", peer = 1, me = 0, rail = { index = 1 } }
      assert.is_true(traffic.before(out01, in10))
      assert.is_false(traffic.before(in10, out01))
    end)

  it("names every phase by one text", function()
    for _, ph in pairs(traffic.PHASE) do assert.is_string(measures.PHASES[ph], ph) end
    assert.equal("send bandwidth (receiving)", measures.phase(traffic.PHASE.rx))
    assert.equal("RDMA write bandwidth", measures.phase(traffic.PHASE.write))
  end)
end)
