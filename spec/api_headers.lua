--- The public functions of the installed rdma-core headers, read at run time:
-- <infiniband/verbs.h>, <rdma/rdma_cma.h> and <rdma/rdma_verbs.h>.
--
--   local names = require("api_headers").extract()  -- {ibv_post_send = {kind =, header =}, ...}
--
-- The headers go through the C preprocessor (`cc -E -dD`), so that every
-- #if is decided as the compiler decides it and every line is attributed to
-- its header by the line markers; only the lines of these three headers are
-- read.  Of them, every top-level declaration or definition whose declarator
-- is a function (brace contents dropped, typedefs skipped) gives an "extern"
-- or a "static inline" function, and every function-like #define gives a
-- "macro" (ibv_reg_mr and ibv_query_port are macros over functions).
-- Public are the names starting with ibv_ or rdma_, and mbps_to_ibv_rate and
-- mult_to_ibv_rate; left out (IGNORED below) are the internal helpers:
-- names starting with "_" (___ibv_query_port, __ibv_reg_mr, _ibv_query_gid_ex:
-- what the public macros and inlines expand to), and verbs_* and vext_*
-- (the provider extension machinery: verbs_get_ctx, verbs_get_ctx_op,
-- vext_field_avail).
local M = {}

M.HEADERS = { "infiniband/verbs.h", "rdma/rdma_cma.h", "rdma/rdma_verbs.h" }
M.IGNORED = {
  { pattern = "^_", why = "internal: what the public macros and inline functions expand to" },
  { pattern = "^verbs_", why = "the provider extension machinery (verbs_get_ctx, ...)" },
  { pattern = "^vext_", why = "the provider extension machinery (vext_field_avail)" },
}

function M.public(name)
  return name:match("^ibv_") or name:match("^rdma_") or name:match("^m[bu][pl][st]_to_ibv_rate$")
end

local function preprocess(cc)
  local src = os.tmpname()
  local f = assert(io.open(src, "w"))
  for _, h in ipairs(M.HEADERS) do f:write("#include <", h, ">\n") end
  f:close()
  local p = assert(io.popen((cc or "cc") .. " -E -dD -x c " .. src .. " 2>&1"))
  local out = p:read("a")
  local ok = p:close()
  os.remove(src)
  assert(ok, "cc -E failed: " .. out)
  return out
end

-- The lines of the three headers (with "\0header\0" marks) and their macros.
local function header_text(out, add)
  local file, keep = nil, {}
  for line in out:gmatch("[^\n]*") do
    local marker = line:match('^# %d+ "([^"]+)"')
    if marker then
      file = nil
      for _, h in ipairs(M.HEADERS) do
        if marker:sub(-#h - 1) == "/" .. h then file = h end
      end
    elseif file then
      local macro = line:match("^#define%s+([%a_][%w_]*)%(")
      if macro then
        add(macro, "macro", file)
      elseif not line:match("^#") then
        keep[#keep + 1] = "\0" .. file .. "\0" .. line
      end
    end
  end
  return table.concat(keep, "\n")
end

-- The function a top-level declaration declares: the first identifier outside
-- parentheses that a '(' follows (attributes aside), or nil.
local function declared(s)
  if s:match("^%s*typedef%f[%W]") then return nil end
  local depth, j = 0, 1
  while j <= #s do
    local c = s:sub(j, j)
    if c == "(" then
      depth, j = depth + 1, j + 1
    elseif c == ")" then
      depth, j = depth - 1, j + 1
    else
      local id, e = s:match("^([%a_][%w_]*)()", j)
      if not id then
        j = j + 1
      elseif depth == 0 and s:match("^%s*%(", e) and id ~= "__attribute__" and id ~= "__asm__" then
        return id, s:match("%f[%w_]static%f[%W]") and "inline" or "extern"
      else
        j = e
      end
    end
  end
end

--- Every function the headers declare or define: name -> {kind = "extern" |
-- "inline" | "macro", header = "infiniband/verbs.h", public = bool, ignored = why}.
function M.extract(cc)
  local found = {}
  local function add(name, kind, header)
    if found[name] then return end
    local t = { kind = kind, header = header, public = M.public(name) ~= nil }
    for _, ig in ipairs(M.IGNORED) do
      if name:match(ig.pattern) then t.ignored, t.public = ig.why, false end
    end
    found[name] = t
  end
  local text = header_text(preprocess(cc), add)
  local depth, chunk, header = 0, {}, nil
  local function finish()
    local name, kind = declared(table.concat(chunk))
    chunk = {}
    if name then add(name, kind, header) end
  end
  local i = 1
  while i <= #text do
    local c = text:sub(i, i)
    if c == "\0" then
      local e = text:find("\0", i + 1, true)
      header, i = text:sub(i + 1, e - 1), e + 1
    else
      if c == "{" then
        depth = depth + 1
      elseif c == "}" then
        depth = depth - 1
        if depth == 0 then finish() end
      elseif depth == 0 then
        if c == ";" then finish() else chunk[#chunk + 1] = c end
      end
      i = i + 1
    end
  end
  return found
end

return M
