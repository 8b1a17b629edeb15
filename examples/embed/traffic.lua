-- examples/embed/traffic.lua: the script examples/embed/embed.c runs on its
-- own verbs objects.  The host passes one table: ctx, pd, cq, a and b (RC QPs
-- connected to each other), src and dst (MRs of count * size bytes), count,
-- size.  Sends count messages from a to b through prepared WR lists and the
-- batched post/poll path; returns what it saw for the host to check.
local ibv = require "ibverbs"
local h = ...
local n, size = h.count, h.size

-- message i (1-based) in slot i of src: "message 00001 ...", padded with '.'
for i = 1, n do
  local m = ("message %05d from Lua"):format(i)
  h.src:write((i - 1) * size, m .. ("."):rep(size - #m))
end

local rl = ibv.recv_wrs(n)                               -- b receives into slot i of dst
rl:fill{wr_id = 1000, sge = {mr = h.dst, length = size}, stride = size}
local sl = ibv.send_wrs(n)
sl:fill{wr_id = 1, opcode = "send", send_flags = {"signaled"}, sge = {mr = h.src, length = size},
        stride = size}
assert(h.b:post_recv(rl))                                -- one C call each
assert(h.a:post_send(sl))

local wcs = ibv.wc_array(32)
local sends, recvs, bytes = 0, 0, 0
local deadline = os.time() + 10
while sends + recvs < 2 * n do
  local got = h.cq:poll(wcs)                            -- fills wcs; allocates nothing
  for i = 1, got do
    assert(wcs:status(i) == "success", wcs:status(i))
    if wcs:opcode(i) == "recv" then
      recvs, bytes = recvs + 1, bytes + wcs:byte_len(i)
    else
      sends = sends + 1
    end
  end
  assert(os.time() <= deadline, "completions missing")
end
return {sends = sends, recvs = recvs, bytes = bytes, qp = h.a, mr = h.dst}
