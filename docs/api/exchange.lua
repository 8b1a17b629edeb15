--- Out-of-band exchange of QP addresses over TCP (luasocket), wire compatible with the rdma-core
-- example tools (`ibv_*_pingpong`, `ibv_xsrq_pingpong`) and with perftest, so a script can talk to
-- those C tools or to another script.  Every call returns `nil, message` on a network error or a
-- malformed message; none exits.
--
--     local ex = require "ibverbs.exchange"
--     local conn = assert(ex.connect("192.0.2.1", 18515))      -- or ex.listen(18515)
--     local remote = assert(ex.client_exchange(conn, {{lid = 0, qpn = qp.qp_num, psn = 0, gid = gid}}))
--
-- A connection (`conn`) has `conn:read(n)` (exactly n bytes), `conn:write(s)` and `conn:close()`;
-- a listener has `l:accept([timeout])` and `l:close()`.
--
-- @module ibverbs.exchange

local ex = {}

--- Size of an `ibv_xsrq_pingpong` address message (66).
ex.XSRQ_DEST_SIZE = 66
--- perftest's key message size (108).
ex.KEY_SIZE = 108
--- The perftest exchange level this side speaks ("6.06").
ex.PERFTEST_VERSION = "6.06"
--- The termination message, "END\0".
ex.END = "END\0"

--- 16 raw bytes from an IPv6 text GID (a 16-byte string passes unchanged; nil gives zeros).
-- @tparam string|nil text "::ffff:192.0.2.1"
-- @treturn string 16 bytes
function ex.gid_raw(text) end

--- The text form of a raw GID, as `inet_ntop` writes it.
-- @tparam string raw 16 bytes
-- @treturn string
function ex.gid_text(raw) end

--- Connects to a server.
-- @tparam string host
-- @tparam integer port
-- @treturn conn
-- @return[2] nil, message
function ex.connect(host, port) end

--- Listens on port (all addresses) for up to backlog clients at a time.
-- @tparam integer port (0: any; `l.sock:getsockname()` tells which)
-- @tparam[opt] integer backlog (default 1)
-- @treturn listener
-- @return[2] nil, message
function ex.listener(port, backlog) end

--- Listens on port and accepts one client.
-- @tparam integer port
-- @tparam[opt] number timeout seconds to wait for the client
-- @treturn conn
-- @return[2] nil, message
function ex.listen(port, timeout) end

--- The pingpong message ("%04x:%06x:%06x:%s" and a NUL) for an address.
-- @tparam table d `lid`, `qpn`, `psn`, `gid`
-- @treturn string
function ex.pack_dest(d) end

--- An address from a pingpong message.
-- @tparam string s
-- @treturn table `lid`, `qpn`, `psn`, `gid` (text), `gid_raw`
-- @return[2] nil, message
function ex.unpack_dest(s) end

--- Client side of the pingpong exchange: sends our addresses (`slots` messages, the rest zero),
-- reads the server's, then "done".
-- @param conn
-- @tparam {table,...} dests our addresses
-- @tparam[opt] integer slots messages each way (default #dests)
-- @treturn {table,...} the server's addresses
-- @return[2] nil, message
function ex.client_exchange(conn, dests, slots) end

--- Server side: reads the client's addresses, calls `ready(remote)` (connect the QPs there; it returns
-- our addresses or nil, message), answers, waits for "done".
-- @param conn
-- @tparam integer slots
-- @tparam function ready
-- @treturn {table,...} the client's addresses
-- @return[2] nil, message
function ex.server_exchange(conn, slots, ready) end

--- The `ibv_xsrq_pingpong` message for an address.
-- @tparam table d `lid`, `recv_qpn`, `send_qpn`, `psn`, `srqn`, `gid`
-- @treturn string 66 bytes
function ex.pack_xsrq_dest(d) end

--- An address from an `ibv_xsrq_pingpong` message.
-- @tparam string s
-- @treturn table `lid`, `recv_qpn`, `send_qpn`, `psn`, `srqn`, `gid`, `gid_raw`
-- @return[2] nil, message "malformed XRC address message"
function ex.unpack_xsrq_dest(s) end

--- Sends an xsrq address message.
-- @param conn
-- @tparam table d
-- @treturn true
-- @return[2] nil, message
function ex.send_xsrq_dest(conn, d) end

--- Reads an xsrq address message.
-- @param conn
-- @treturn table
-- @return[2] nil, message
function ex.recv_xsrq_dest(conn) end

--- Sends the termination message.
-- @param conn
-- @treturn true
-- @return[2] nil, message
function ex.send_end(conn) end

--- Reads the termination message.
-- @param conn
-- @treturn true
-- @return[2] nil, message ("Invalid termination ack was accepted", or the read's error)
function ex.recv_end(conn) end

--- perftest's `ctx_xchg_data`: the client writes first, the server reads first.
-- @param conn
-- @tparam string data
-- @treturn string the peer's data (same size)
-- @return[2] nil, message
function ex.xchg(conn, data) end

--- What every perftest test exchanges first: the versions (this side speaks 6.06), the system
-- data (page and cache-line size, from 5.32 on) and the MTU (from 5.1 on).
-- @param conn
-- @tparam integer mtu this side's MTU in bytes (256 to 4096)
-- @treturn integer the MTU both sides use: the smaller of the two
-- @treturn string the peer's version
-- @return[2] nil, message
function ex.perftest_start(conn, mtu) end

--- perftest's exchange of bandwidth reports (`xchg_bw_reports`) at the end of a half-duplex
-- bandwidth test: this side's report goes to the peer, the peer's comes back (each field its own
-- exchange: size and iterations as big-endian integers, 4-byte iterations before perftest 5.33;
-- the figures as big-endian IEEE doubles).
-- @param conn
-- @tparam table rep `size`, `iters`, `bw_peak`, `bw_avg` (MB/s), `msg_rate` (Mpps)
-- @tparam string version the peer's (`ex.perftest_start`'s second result)
-- @treturn table the peer's report, the same fields
-- @return[2] nil, message
function ex.perftest_bw_reports(conn, rep, version) end

--- perftest's key message (`lid:out_reads:qpn:psn:rkey:vaddr:gid` bytes:srqn).
-- @tparam table d `lid`, `out_reads`, `qpn`, `psn`, `rkey`, `vaddr`, `gid`, `srqn`
-- @treturn string 108 bytes
function ex.pack_key(d) end

--- A key message's fields.
-- @tparam string s
-- @treturn table
-- @return[2] nil, message
function ex.unpack_key(s) end

--- One perftest handshake: exchanges key messages.
-- @param conn
-- @tparam table d our key fields
-- @treturn table the peer's
-- @return[2] nil, message
function ex.hand_shake(conn, d) end

return ex
