--- ibverbs.ffi: the data path for LuaJIT scripts, through the FFI.
--
--   local ibv = require "ibverbs"
--   local xffi = require "ibverbs.ffi"          -- LuaJIT only
--   local q, c = xffi.qp(qp), xffi.cq(cq)       -- checked handles for the flat C calls
--   local mem = xffi.mem(mr)                    -- span of uint8_t over the MR
--   local rw = xffi.recv_wrs(ibv.recv_wrs(16))  -- span of struct ibv_recv_wr
--   local wc = xffi.wc_array(ibv.wc_array(16))  -- span of struct ibv_wc
--   rw:at(0).wr_id = 7                          -- checked element (0-based, like C)
--   rw.p[0].sg_list[0].length = 64              -- raw pointers, unchecked
--   assert(xffi.post_recv(q, rw, 0, 16))        -- posts the chain rw[0..15]
--   local n = assert(xffi.poll_cq(c, wc))       -- fills wc.p[0..n-1]
--   if wc.p[0].status == xffi.C.IBV_WC_SUCCESS then ... end
--   local sw = xffi.link(xffi.span("struct ibv_send_wr", ffi.new("struct ibv_send_wr[4]"), 4))
--
-- The data-path verbs (ibv_post_send, ibv_poll_cq, ...) are static inline in
-- verbs.h, so the core module exports flat C functions (ibvl_ffi_*) that this
-- file declares next to the verbs structs they take.  Spans and handles keep
-- the Lua object they come from alive; closing that object makes a handle's
-- calls fail with EBADF, while pointers into its memory become invalid, as
-- they would in C.  What FFI code writes into WRs is not checked: SGE
-- addresses and keys are the device's to check, and an AH or MW a send WR
-- names must stay open while it is posted.  A prepared list posted later
-- through the core is checked: an entry's SGEs beyond those its last set or
-- fill gave it (num_sge raised here) are refused there.  tools/ffi-layout.lua checks
-- every struct, field and constant below against the C headers.
if type(jit) ~= "table" then
  error("ibverbs.ffi needs LuaJIT (it uses the ffi library); this interpreter is " .. _VERSION, 2)
end
local ffi = require "ffi"
local core = require "ibverbs.core"

local M = {}

--- The declarations, parsed by tools/ffi-layout.lua: one field per line,
-- every enumerator with its value written out.
M.cdef = [[
struct ibv_mr;
struct ibv_mw;
struct ibv_ah;

enum ibv_wc_status {
  IBV_WC_SUCCESS = 0,
  IBV_WC_LOC_LEN_ERR = 1,
  IBV_WC_LOC_QP_OP_ERR = 2,
  IBV_WC_LOC_EEC_OP_ERR = 3,
  IBV_WC_LOC_PROT_ERR = 4,
  IBV_WC_WR_FLUSH_ERR = 5,
  IBV_WC_MW_BIND_ERR = 6,
  IBV_WC_BAD_RESP_ERR = 7,
  IBV_WC_LOC_ACCESS_ERR = 8,
  IBV_WC_REM_INV_REQ_ERR = 9,
  IBV_WC_REM_ACCESS_ERR = 10,
  IBV_WC_REM_OP_ERR = 11,
  IBV_WC_RETRY_EXC_ERR = 12,
  IBV_WC_RNR_RETRY_EXC_ERR = 13,
  IBV_WC_LOC_RDD_VIOL_ERR = 14,
  IBV_WC_REM_INV_RD_REQ_ERR = 15,
  IBV_WC_REM_ABORT_ERR = 16,
  IBV_WC_INV_EECN_ERR = 17,
  IBV_WC_INV_EEC_STATE_ERR = 18,
  IBV_WC_FATAL_ERR = 19,
  IBV_WC_RESP_TIMEOUT_ERR = 20,
  IBV_WC_GENERAL_ERR = 21,
};

enum ibv_wc_opcode {
  IBV_WC_SEND = 0,
  IBV_WC_RDMA_WRITE = 1,
  IBV_WC_RDMA_READ = 2,
  IBV_WC_COMP_SWAP = 3,
  IBV_WC_FETCH_ADD = 4,
  IBV_WC_BIND_MW = 5,
  IBV_WC_LOCAL_INV = 6,
  IBV_WC_TSO = 7,
  IBV_WC_RECV = 128,
  IBV_WC_RECV_RDMA_WITH_IMM = 129,
};

enum ibv_wc_flags {
  IBV_WC_GRH = 1,
  IBV_WC_WITH_IMM = 2,
  IBV_WC_IP_CSUM_OK = 4,
  IBV_WC_WITH_INV = 8,
};

enum ibv_wr_opcode {
  IBV_WR_RDMA_WRITE = 0,
  IBV_WR_RDMA_WRITE_WITH_IMM = 1,
  IBV_WR_SEND = 2,
  IBV_WR_SEND_WITH_IMM = 3,
  IBV_WR_RDMA_READ = 4,
  IBV_WR_ATOMIC_CMP_AND_SWP = 5,
  IBV_WR_ATOMIC_FETCH_AND_ADD = 6,
  IBV_WR_LOCAL_INV = 7,
  IBV_WR_BIND_MW = 8,
  IBV_WR_SEND_WITH_INV = 9,
  IBV_WR_TSO = 10,
};

enum ibv_send_flags {
  IBV_SEND_FENCE = 1,
  IBV_SEND_SIGNALED = 2,
  IBV_SEND_SOLICITED = 4,
  IBV_SEND_INLINE = 8,
  IBV_SEND_IP_CSUM = 16,
};

struct ibv_sge {
  uint64_t addr;
  uint32_t length;
  uint32_t lkey;
};

struct ibv_recv_wr {
  uint64_t wr_id;
  struct ibv_recv_wr *next;
  struct ibv_sge *sg_list;
  int num_sge;
};

struct ibv_mw_bind_info {
  struct ibv_mr *mr;
  uint64_t addr;
  uint64_t length;
  unsigned int mw_access_flags;
};

struct ibv_send_wr {
  uint64_t wr_id;
  struct ibv_send_wr *next;
  struct ibv_sge *sg_list;
  int num_sge;
  enum ibv_wr_opcode opcode;
  unsigned int send_flags;
  union {
    uint32_t imm_data;
    uint32_t invalidate_rkey;
  };
  union {
    struct {
      uint64_t remote_addr;
      uint32_t rkey;
    } rdma;
    struct {
      uint64_t remote_addr;
      uint64_t compare_add;
      uint64_t swap;
      uint32_t rkey;
    } atomic;
    struct {
      struct ibv_ah *ah;
      uint32_t remote_qpn;
      uint32_t remote_qkey;
    } ud;
  } wr;
  union {
    struct {
      uint32_t remote_srqn;
    } xrc;
  } qp_type;
  union {
    struct {
      struct ibv_mw *mw;
      uint32_t rkey;
      struct ibv_mw_bind_info bind_info;
    } bind_mw;
    struct {
      void *hdr;
      uint16_t hdr_sz;
      uint16_t mss;
    } tso;
  };
};

struct ibv_wc {
  uint64_t wr_id;
  enum ibv_wc_status status;
  enum ibv_wc_opcode opcode;
  uint32_t vendor_err;
  uint32_t byte_len;
  union {
    uint32_t imm_data;
    uint32_t invalidated_rkey;
  };
  uint32_t qp_num;
  uint32_t src_qp;
  unsigned int wc_flags;
  uint16_t pkey_index;
  uint16_t slid;
  uint8_t sl;
  uint8_t dlid_path_bits;
};
]]

--- The flat C ABI of ibverbs.core (csrc/datapath/ffi.c).  A handle is the address of
-- the object's userdata; the calls check its type and that it is open.
M.cdef_calls = [[
struct ibvl_ffi_qp;
struct ibvl_ffi_cq;
struct ibvl_ffi_srq;
int ibvl_ffi_post_recv(struct ibvl_ffi_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int ibvl_ffi_post_send(struct ibvl_ffi_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int ibvl_ffi_post_srq_recv(struct ibvl_ffi_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int ibvl_ffi_poll_cq(struct ibvl_ffi_cq *cq, int n, struct ibv_wc *wc);
int ibvl_ffi_req_notify_cq(struct ibvl_ffi_cq *cq, int solicited_only);
char *strerror(int errnum);
]]

ffi.cdef(M.cdef)
ffi.cdef(M.cdef_calls)

-- The flat functions live in the core module's shared object, or in the
-- program itself when ibverbs.core is built in (ibvlua exports them).
if package.preload["ibverbs.core"] and pcall(function() return ffi.C.ibvl_ffi_poll_cq end) then
  M.C = ffi.C
else
  local path = assert(package.searchpath("ibverbs.core", package.cpath))
  M.C = ffi.load(path)
  M.path = path
end

-- Objects kept alive by the cdata made from them (weak keys: a handle or a
-- span, as long as the script holds it).
local anchors = setmetatable({}, { __mode = "k" })

local function anchor(cdata, obj)
  anchors[cdata] = obj
  return cdata
end

local HANDLE_TYPES = {
  ["ibverbs.qp"] = "struct ibvl_ffi_qp *",
  ["ibverbs.cq"] = "struct ibvl_ffi_cq *",
  ["ibverbs.srq"] = "struct ibvl_ffi_srq *",
}

local function handle(tname, fname)
  local ct = ffi.typeof(HANDLE_TYPES[tname])
  return function(obj)
    local _, name = core.rawptr(obj)
    if name ~= tname then
      error(("bad argument #1 to '%s' (%s expected, got %s)"):format(fname, tname, name), 2)
    end
    return anchor(ffi.cast(ct, obj), obj)
  end
end

--- xffi.qp(qp), xffi.cq(cq), xffi.srq(srq): handles for the ibvl_ffi_* calls.
M.qp = handle("ibverbs.qp", "qp")
M.cq = handle("ibverbs.cq", "cq")
M.srq = handle("ibverbs.srq", "srq")

--- xffi.ptr(obj, ctype): the verbs pointer of any open object, cast to ctype
-- ("struct ibv_qp *"); it keeps obj alive but not open.
function M.ptr(obj, ctype)
  return anchor(ffi.cast(ctype or "void *", core.rawptr(obj)), obj)
end

-- Spans: { p = element pointer, n = count } with checked access.
local spans = {}

local function span_type(elem)
  if spans[elem] then return spans[elem] end
  local name = "ibvl_span_" .. elem:gsub("%W", "_")
  ffi.cdef(("struct %s { %s *p; int32_t n; };"):format(name, elem))
  local ct = ffi.typeof("struct " .. name)
  local methods = {}
  --- span:at(i): element i (0-based) by reference; raises past the end.
  function methods.at(s, i)
    if not (i >= 0 and i < s.n) then
      error(("index %s outside the span of %d %s"):format(tostring(i), s.n, elem), 2)
    end
    return s.p[i]
  end
  ffi.metatype(ct, { __index = methods, __len = function(s) return s.n end })
  spans[elem] = ct
  return ct
end

--- xffi.span(elem, ptr, n [, owner]): a checked view of n elements at ptr.
function M.span(elem, ptr, n, owner)
  local s = span_type(elem)(ffi.cast(elem .. " *", ptr), n)
  return owner ~= nil and anchor(s, owner) or s
end

local function memspan(elem, kinds, fname)
  return function(obj)
    local base, n, kind = core.rawmem(obj)
    if not kinds[kind] then
      error(("bad argument #1 to '%s' (ibverbs.%s expected, got ibverbs.%s)"):format(
        fname, fname, kind), 2)
    end
    return M.span(elem, base, n, obj)
  end
end

--- xffi.mem(mr_or_buffer): bytes of an MR or an ibv.buffer (uint8_t span).
M.mem = memspan("uint8_t", { mr = true, buffer = true }, "mem")
--- xffi.recv_wrs(list), xffi.send_wrs(list), xffi.wc_array(wcs): their memory.
M.recv_wrs = memspan("struct ibv_recv_wr", { recv_wrs = true }, "recv_wrs")
M.send_wrs = memspan("struct ibv_send_wr", { send_wrs = true }, "send_wrs")
M.wc_array = memspan("struct ibv_wc", { wc_array = true }, "wc_array")
--- xffi.sges(list): the SGEs of a WR list, in one array (max_sge per WR).
function M.sges(list)
  local _, _, kind, sge, nsge = core.rawmem(list)
  if kind ~= "recv_wrs" and kind ~= "send_wrs" then
    error("bad argument #1 to 'sges' (ibverbs.recv_wrs or ibverbs.send_wrs expected)", 2)
  end
  return M.span("struct ibv_sge", sge, nsge, list)
end

local function fail(call, err)
  return nil, call .. ": " .. ffi.string(ffi.C.strerror(err)), err
end

--- xffi.link(span): chains every WR of a span to the next one, as prepared
-- lists are from the start; WR arrays from ffi.new need it once.
function M.link(s)
  local p = s.p
  for i = 0, s.n - 2 do p[i].next = p + i + 1 end
  p[s.n - 1].next = nil
  return s
end

-- Posts the chain that starts at s.p[first], cut after count WRs (the span
-- must be linked: a prepared list, or xffi.link); the cut is undone after
-- the call, so the list stays as it was.
local function poster(name, call, cpost, wrtype)
  local bad = ffi.new(wrtype .. " *[1]")
  local ptrtype = ffi.typeof(wrtype .. " *")
  return function(h, s, first, count)
    if not ffi.istype(ptrtype, s.p) then
      error(("bad argument #2 to '%s' (span of %s expected)"):format(name, wrtype), 2)
    end
    first = first or 0
    count = count or s.n - first
    if not (first >= 0 and count >= 1 and first + count <= s.n) then
      error(("WRs %s..%s outside the span of %d"):format(tostring(first), tostring(first + count - 1), s.n), 2)
    end
    local p, last = s.p, first + count - 1
    local keep = p[last].next
    p[last].next = nil
    local rc = cpost(h, p + first, bad)
    p[last].next = keep
    if rc ~= 0 then
      local r1, r2, r3 = fail(call, rc)
      return r1, r2, r3, tonumber(bad[0] - p)
    end
    return true
  end
end

--- xffi.post_recv(q, span [, first, count]) -> true | nil, msg, errno, bad index
local C = M.C
M.post_recv = poster("post_recv", "ibv_post_recv",
  function(h, wr, bad) return C.ibvl_ffi_post_recv(h, wr, bad) end, "struct ibv_recv_wr")
M.post_send = poster("post_send", "ibv_post_send",
  function(h, wr, bad) return C.ibvl_ffi_post_send(h, wr, bad) end, "struct ibv_send_wr")
M.post_srq_recv = poster("post_srq_recv", "ibv_post_srq_recv",
  function(h, wr, bad) return C.ibvl_ffi_post_srq_recv(h, wr, bad) end, "struct ibv_recv_wr")

local wcptr = ffi.typeof("struct ibv_wc *")

--- xffi.poll_cq(c, wcspan [, max]) -> count | nil, msg, errno
function M.poll_cq(h, s, max)
  if not ffi.istype(wcptr, s.p) then
    error("bad argument #2 to 'poll_cq' (span of struct ibv_wc expected)", 2)
  end
  max = max or s.n
  if not (max >= 1 and max <= s.n) then
    error(("max %s outside the span of %d"):format(tostring(max), s.n), 2)
  end
  local n = C.ibvl_ffi_poll_cq(h, max, s.p)
  if n < 0 then return fail("ibv_poll_cq", -n) end
  return n
end

--- xffi.req_notify_cq(c [, solicited_only]) -> true | nil, msg, errno
function M.req_notify_cq(h, solicited)
  local rc = C.ibvl_ffi_req_notify_cq(h, solicited and 1 or 0)
  if rc ~= 0 then return fail("ibv_req_notify_cq", rc) end
  return true
end

return M
